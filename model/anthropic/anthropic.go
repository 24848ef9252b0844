package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentbot/agentbot/model"
)

// Name is the provider name used in errors.
const Name = "anthropic"

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is sent when Request.MaxTokens is 0.
const DefaultMaxTokens = 1024

// Placeholder is the first user message put before a history that starts
// with an assistant message.
const Placeholder = "(conversation continues)"

// Provider talks to the Messages API.
type Provider struct {
	messages sdk.MessageService
	model    string
	timeout  time.Duration
	apiKey   string
}

var _ model.Provider = (*Provider)(nil)

// New returns a provider for cfg. httpClient may be nil (a default client is
// used). opts are extra SDK options applied last (tests use
// option.WithMaxRetries(0)).
func New(cfg model.Config, httpClient *http.Client, opts ...option.RequestOption) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: model is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic: apiKey is required")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	all := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(cfg.Retries),
	}
	all = append(all, opts...)
	client := sdk.NewClient(all...)
	return &Provider{messages: client.Messages, model: cfg.Model, timeout: cfg.Timeout, apiKey: cfg.APIKey}, nil
}

// Complete sends req as one Messages API call.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	msg, err := p.messages.New(ctx, BuildParams(p.model, req))
	if err != nil {
		return model.Response{}, p.mapError(ctx, err)
	}
	return toResponse(msg), nil
}

var _ model.Streamer = (*Provider)(nil)

// Stream sends req as one streamed Messages API call (server-sent events):
// onText gets each text delta; tool_use input is accumulated, never shown.
func (p *Provider) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	stream := p.messages.NewStreaming(ctx, BuildParams(p.model, req))
	defer stream.Close()
	var msg sdk.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return model.Response{}, &model.Error{Kind: model.KindUnknown, Provider: Name, Err: model.Redact(err, p.apiKey)}
		}
		if ev.Type == "content_block_delta" {
			if d := ev.AsContentBlockDelta().Delta; d.Type == "text_delta" && d.Text != "" {
				onText(d.Text)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, p.mapError(ctx, err)
	}
	return toResponse(&msg), nil
}

// toResponse maps a Messages API message onto a model.Response.
func toResponse(msg *sdk.Message) model.Response {
	u := msg.Usage
	out := model.Response{Usage: model.Usage{
		Input:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output: u.OutputTokens,
		Cached: u.CacheReadInputTokens,
	}}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			out.Text += b.Text
		case "tool_use":
			args := strings.TrimSpace(string(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	return out
}

func (p *Provider) mapError(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		e := model.NewError(Name, apiErr.StatusCode, err, p.apiKey)
		if apiErr.Response != nil {
			e.Retry = model.ParseRetryAfter(apiErr.Response.Header)
		}
		// An error event inside a streamed 200 response carries only its type.
		switch apiErr.Type() {
		case "overloaded_error", "api_error":
			e.Kind = model.KindServer
		case "rate_limit_error":
			e.Kind = model.KindRateLimit
		}
		return e
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &model.Error{Kind: model.KindTimeout, Provider: Name, Err: model.Redact(err, p.apiKey)}
	}
	return model.NewError(Name, 0, err, p.apiKey)
}

// block is one content block of a message being assembled.
type block struct {
	kind      string // "text", "tool_use", "tool_result", "image"
	text      string
	id        string
	name      string // tool_use
	args      string // tool_use
	mediaType string // image
	data      []byte // image
}

type turn struct {
	role   model.Role // user or assistant
	blocks []block
}

// add appends blocks to t: text is joined into a preceding text block, and
// tool_result blocks go before the first text block.
func (t *turn) add(bs []block) {
	for _, b := range bs {
		switch {
		case b.kind == "tool_result":
			i := 0
			for i < len(t.blocks) && t.blocks[i].kind == "tool_result" {
				i++
			}
			t.blocks = append(t.blocks[:i], append([]block{b}, t.blocks[i:]...)...)
		case b.kind == "text" && len(t.blocks) > 0 && t.blocks[len(t.blocks)-1].kind == "text":
			last := &t.blocks[len(t.blocks)-1]
			last.text = model.JoinText(last.text, b.text)
		default:
			t.blocks = append(t.blocks, b)
		}
	}
}

// buildTurns applies the replay rules of the package doc.
func buildTurns(msgs []model.Message) []turn {
	var out []turn
	for _, m := range model.PairToolResults(msgs) {
		role := m.Role
		var bs []block
		switch m.Role {
		case model.RoleTool:
			role = model.RoleUser
			bs = []block{{kind: "tool_result", id: m.ToolCallID, text: m.Text}}
		case model.RoleUser:
			for _, im := range m.Images {
				bs = append(bs, block{kind: "image", mediaType: im.MediaType, data: im.Data})
			}
			if strings.TrimSpace(m.Text) != "" {
				bs = append(bs, block{kind: "text", text: m.Text})
			}
		case model.RoleAssistant:
			if strings.TrimSpace(m.Text) != "" {
				bs = []block{{kind: "text", text: m.Text}}
			}
			for _, c := range m.ToolCalls {
				bs = append(bs, block{kind: "tool_use", id: c.ID, name: c.Name, args: c.Arguments})
			}
		}
		if len(bs) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].add(bs)
			continue
		}
		t := turn{role: role}
		t.add(bs)
		out = append(out, t)
	}
	if len(out) > 0 && out[0].role == model.RoleAssistant {
		out = append([]turn{{role: model.RoleUser, blocks: []block{{kind: "text", text: Placeholder}}}}, out...)
	}
	if n := len(out); n > 0 && out[n-1].role == model.RoleAssistant {
		bs := out[n-1].blocks
		if last := &bs[len(bs)-1]; last.kind == "text" {
			last.text = strings.TrimRightFunc(last.text, unicode.IsSpace)
		}
	}
	return out
}

func toolInput(args string) json.RawMessage {
	var obj map[string]any
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// BuildParams builds the Messages API request for req (see the package doc
// for the replay rules). req is not modified.
func BuildParams(modelName string, req model.Request) sdk.MessageNewParams {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{Model: modelName, MaxTokens: int64(maxTokens)}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range buildTurns(req.Messages) {
		var content []sdk.ContentBlockParamUnion
		for _, b := range t.blocks {
			switch b.kind {
			case "text":
				content = append(content, sdk.NewTextBlock(b.text))
			case "image":
				content = append(content, sdk.NewImageBlockBase64(b.mediaType, base64.StdEncoding.EncodeToString(b.data)))
			case "tool_use":
				content = append(content, sdk.NewToolUseBlock(b.id, toolInput(b.args), b.name))
			case "tool_result":
				r := sdk.ToolResultBlockParam{ToolUseID: b.id}
				if strings.TrimSpace(b.text) != "" {
					r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.text}}}
				}
				content = append(content, sdk.ContentBlockParamUnion{OfToolResult: &r})
			}
		}
		if t.role == model.RoleUser {
			params.Messages = append(params.Messages, sdk.NewUserMessage(content...))
		} else {
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(content...))
		}
	}
	for _, tool := range req.Tools {
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: toolParam(tool)})
	}
	return params
}

func toolParam(t model.Tool) *sdk.ToolParam {
	schema := sdk.ToolInputSchemaParam{}
	extra := map[string]any{}
	for k, v := range t.Parameters {
		switch k {
		case "type":
		case "properties":
			schema.Properties = v
		case "required":
			switch r := v.(type) {
			case []string:
				schema.Required = r
			case []any:
				for _, s := range r {
					if s, ok := s.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
		default:
			extra[k] = v
		}
	}
	if schema.Properties == nil {
		schema.Properties = map[string]any{}
	}
	if len(extra) > 0 {
		schema.ExtraFields = extra
	}
	p := &sdk.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		p.Description = sdk.String(t.Description)
	}
	return p
}

// String describes the provider without credentials.
func (p *Provider) String() string { return fmt.Sprintf("anthropic(%s)", p.model) }
