package openai

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentbot/agentbot/model"
)

// Name is the provider name used in errors.
const Name = "openai"

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Provider talks to a Chat Completions endpoint.
type Provider struct {
	chat    oai.ChatCompletionService
	model   string
	timeout time.Duration
	apiKey  string
}

var _ model.Provider = (*Provider)(nil)

// New returns a provider for cfg. httpClient may be nil (a default client is
// used). opts are extra SDK options applied last (tests use
// option.WithMaxRetries(0)).
func New(cfg model.Config, httpClient *http.Client, opts ...option.RequestOption) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: model is required")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	all := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(cfg.Retries),
	}
	all = append(all, opts...)
	// NewChatCompletionService, unlike NewClient, does not read OPENAI_*
	// environment variables.
	return &Provider{
		chat:    oai.NewChatCompletionService(all...),
		model:   cfg.Model,
		timeout: cfg.Timeout,
		apiKey:  cfg.APIKey,
	}, nil
}

// Complete sends req as one chat completion.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	resp, err := p.chat.New(ctx, BuildParams(p.model, req))
	if err != nil {
		return model.Response{}, p.mapError(ctx, err)
	}
	if len(resp.Choices) == 0 {
		return model.Response{}, &model.Error{Kind: model.KindUnknown, Provider: Name, Err: errors.New("response has no choices")}
	}
	out := toResponse(resp.Choices[0].Message)
	out.Usage = toUsage(resp.Usage)
	return out, nil
}

// toUsage maps the reported token counts.
func toUsage(u oai.CompletionUsage) model.Usage {
	return model.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Cached: u.PromptTokensDetails.CachedTokens}
}

var _ model.Streamer = (*Provider)(nil)

// Stream sends req as one streamed chat completion (server-sent events):
// onText gets each content delta; tool-call deltas are accumulated, never
// shown.
func (p *Provider) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	params := BuildParams(p.model, req)
	// The usage arrives in a last chunk without choices.
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	stream := p.chat.NewStreaming(ctx, params)
	defer stream.Close()
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			onText(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, p.mapError(ctx, err)
	}
	if len(acc.Choices) == 0 {
		return model.Response{}, &model.Error{Kind: model.KindUnknown, Provider: Name, Err: errors.New("stream has no choices")}
	}
	out := toResponse(acc.Choices[0].Message)
	out.Usage = toUsage(acc.Usage)
	return out, nil
}

// toResponse maps a completion message onto a model.Response.
func toResponse(msg oai.ChatCompletionMessage) model.Response {
	out := model.Response{Text: msg.Content}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		args := tc.Function.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return out
}

func (p *Provider) mapError(ctx context.Context, err error) error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		e := model.NewError(Name, apiErr.StatusCode, err, p.apiKey)
		if apiErr.Response != nil {
			e.Retry = model.ParseRetryAfter(apiErr.Response.Header)
		}
		return e
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &model.Error{Kind: model.KindTimeout, Provider: Name, Err: model.Redact(err, p.apiKey)}
	}
	return model.NewError(Name, 0, err, p.apiKey)
}

// BuildParams builds the Chat Completions request for req (see the package
// doc for the replay rules).
func BuildParams(modelName string, req model.Request) oai.ChatCompletionNewParams {
	params := oai.ChatCompletionNewParams{
		Model:    shared.ChatModel(modelName),
		Messages: BuildMessages(req),
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = oai.Int(int64(req.MaxTokens))
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			def.Description = oai.String(t.Description)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(def))
	}
	return params
}

// turn is a user or assistant message being assembled from one or more
// adjacent history messages.
type turn struct {
	role      model.Role
	text      string
	name      string
	names     bool // more than one distinct author
	toolCalls []model.ToolCall
	images    []model.Image
}

// BuildMessages renders req's system prompt and history for Chat
// Completions. req is not modified.
func BuildMessages(req model.Request) []oai.ChatCompletionMessageParamUnion {
	var out []oai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, oai.SystemMessage(req.System))
	}
	var cur *turn
	flush := func() {
		if cur != nil {
			out = append(out, cur.param())
			cur = nil
		}
	}
	for _, m := range model.PairToolResults(req.Messages) {
		switch m.Role {
		case model.RoleTool:
			flush()
			out = append(out, oai.ToolMessage(m.Text, m.ToolCallID))
			continue
		case model.RoleUser, model.RoleAssistant:
		default:
			continue
		}
		if strings.TrimSpace(m.Text) == "" && len(m.ToolCalls) == 0 && len(m.Images) == 0 {
			continue
		}
		if m.Role != model.RoleUser {
			m.Images = nil
		}
		if cur != nil && cur.role == m.Role && len(cur.toolCalls) == 0 {
			cur.text = model.JoinText(cur.text, m.Text)
			cur.images = append(cur.images, m.Images...)
			cur.toolCalls = m.ToolCalls
			if m.Name != cur.name {
				cur.names = true
			}
			continue
		}
		flush()
		cur = &turn{role: m.Role, text: m.Text, name: m.Name, toolCalls: m.ToolCalls, images: m.Images}
	}
	flush()
	return out
}

func (t *turn) param() oai.ChatCompletionMessageParamUnion {
	if t.role == model.RoleUser {
		u := oai.ChatCompletionUserMessageParam{}
		if len(t.images) == 0 {
			u.Content.OfString = oai.String(t.text)
		} else {
			// Text first, then each picture as an image_url data URL.
			if t.text != "" {
				u.Content.OfArrayOfContentParts = append(u.Content.OfArrayOfContentParts, oai.TextContentPart(t.text))
			}
			for _, im := range t.images {
				url := "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
				u.Content.OfArrayOfContentParts = append(u.Content.OfArrayOfContentParts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: url}))
			}
		}
		if n := sanitizeName(t.name); n != "" && !t.names {
			u.Name = oai.String(n)
		}
		return oai.ChatCompletionMessageParamUnion{OfUser: &u}
	}
	a := oai.ChatCompletionAssistantMessageParam{}
	if t.text != "" || len(t.toolCalls) == 0 {
		a.Content.OfString = oai.String(t.text)
	}
	for _, c := range t.toolCalls {
		args := c.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
			},
		})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if strings.Trim(n, "_") == "" {
		return ""
	}
	return n
}

// String describes the provider without credentials.
func (p *Provider) String() string { return fmt.Sprintf("openai(%s)", p.model) }
