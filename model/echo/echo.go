package echo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/model"
)

// Name is the provider name used in errors.
const Name = "echo"

// Provider is the echo model. The zero value is ready to use.
type Provider struct{}

// New returns the echo provider.
func New() *Provider { return &Provider{} }

var _ model.Provider = (*Provider)(nil)

var failStatus = map[model.ErrorKind]int{
	model.KindAuth:       401,
	model.KindRateLimit:  429,
	model.KindServer:     500,
	model.KindBadRequest: 400,
}

// Complete answers req following the grammar in the package doc.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, model.NewError(Name, 0, err)
	}
	msgs := req.Messages
	var last model.Message
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1]
	}
	if last.Role == model.RoleUser {
		if kind, ok := failKind(last.Text); ok {
			return model.Response{}, &model.Error{Kind: kind, Status: failStatus[kind], Provider: Name,
				Err: fmt.Errorf("echo: !fail %s", kind)}
		}
		calls, err := toolCalls(last.Text, countCalls(msgs))
		if err != nil {
			return model.Response{}, &model.Error{Kind: model.KindBadRequest, Status: 400, Provider: Name, Err: err}
		}
		if len(calls) > 0 {
			return model.Response{ToolCalls: calls}, nil
		}
	}
	if last.Role == model.RoleTool {
		return model.Response{Text: summarize(msgs)}, nil
	}
	userText, found := lastUserText(msgs)
	if t, ok := strings.CutPrefix(strings.TrimSpace(userText), "Task:"); ok {
		return model.Response{Text: "Done: " + strings.TrimSpace(t)}, nil
	}
	for _, line := range strings.Split(req.System, "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "Task:"); ok {
			return model.Response{Text: "Done: " + strings.TrimSpace(t)}, nil
		}
	}
	if !found {
		return model.Response{Text: "echo: (no user message)"}, nil
	}
	return model.Response{Text: "echo: " + userText}, nil
}

func lastUserText(msgs []model.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser {
			return msgs[i].Text, true
		}
	}
	return "", false
}

func failKind(text string) (model.ErrorKind, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "!fail")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		want := model.ErrorKind(strings.TrimSpace(rest))
		for _, k := range model.Kinds {
			if k == want {
				return k, true
			}
		}
		return model.KindUnknown, true
	}
	return "", false
}

func countCalls(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	return n
}

func toolCalls(text string, prior int) ([]model.ToolCall, error) {
	var calls []model.ToolCall
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "!tool ")
		if !ok {
			continue
		}
		name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
			return nil, errors.New("echo: !tool " + name + ": arguments are not a JSON object")
		}
		calls = append(calls, model.ToolCall{
			ID:        fmt.Sprintf("call_%d", prior+len(calls)+1),
			Name:      name,
			Arguments: args,
		})
	}
	return calls, nil
}

func summarize(msgs []model.Message) string {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == model.RoleTool {
		start--
	}
	names := make(map[string]string)
	for _, m := range msgs[:start] {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	var b strings.Builder
	b.WriteString("tool results:")
	for _, m := range msgs[start:] {
		name, ok := names[m.ToolCallID]
		if !ok {
			name = m.ToolCallID
		}
		fmt.Fprintf(&b, "\n- %s: %s", name, m.Text)
	}
	return b.String()
}

var _ model.Streamer = (*Provider)(nil)

// Stream answers like Complete and hands the text to onText in pieces (a
// word and the spaces after it each), so streaming paths can be exercised
// without a network.
func (p *Provider) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	resp, err := p.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	for _, piece := range Pieces(resp.Text) {
		onText(piece)
	}
	return resp, nil
}

// Pieces cuts text into words, each with the whitespace after it; the
// pieces concatenated are text.
func Pieces(text string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range text {
		space := r == ' ' || r == '\n' || r == '\t'
		if inSpace && !space {
			out = append(out, text[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}
