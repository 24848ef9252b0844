package model

import (
	"context"
	"strings"
	"time"
)

// Role is who a message speaks for.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one function call requested by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON object text
}

// Message is one history entry as the model sees it.
type Message struct {
	Role Role
	Text string
	// Name is the author (a user's display name or an agent persona),
	// optional. Providers pass it on where their API has a place for it.
	Name string
	// ToolCalls are set on assistant messages that called tools.
	ToolCalls []ToolCall
	// ToolCallID is set on tool messages: the call this is the result of.
	ToolCallID string
	// Images are pictures a user message carries, sent only to a model
	// configured with vision: true (OpenAI image_url parts, Anthropic image
	// blocks); providers without images ignore them.
	Images []Image
}

// Image is a picture's bytes and media type (image/png, image/jpeg,
// image/webp, image/gif).
type Image struct {
	MediaType string
	Data      []byte
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON Schema object; nil means no parameters
}

// Request is one completion request.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: provider default
}

// Response is the model's answer: text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// Model is the configured model (a models entry name) that answered;
	// set by a fallback chain, empty from a bare provider.
	Model string
	// Usage is the tokens the provider reported for this call.
	Usage Usage
}

// Usage is the token count of one model call as the provider reports it.
type Usage struct {
	Input  int64 // prompt tokens, cached ones included
	Output int64 // completion tokens
	Cached int64 // prompt tokens read from the provider's cache
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, Output: u.Output + v.Output, Cached: u.Cached + v.Cached}
}

// Provider completes requests. Implementations are safe for concurrent use
// and never modify req.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Config selects and configures a provider (the caller maps the project's
// configuration onto it).
type Config struct {
	Provider string // "echo" (default when empty), "openai", "anthropic"
	BaseURL  string // optional API base URL override
	APIKey   string
	Model    string
	Timeout  time.Duration // whole-call limit including retries; 0: none beyond ctx
	// Retries is how often the official SDK retries one call itself (429,
	// 5xx, connection errors, honouring Retry-After); 0 none. A fallback
	// chain sets it so that SDK retries and fallbacks do not multiply.
	Retries int
}

// MergeSeparator joins the texts of adjacent same-role messages when a
// provider's API requires alternating roles.
const MergeSeparator = "\n\n"

// JoinText joins two message texts with MergeSeparator, skipping empty ones.
func JoinText(a, b string) string {
	switch {
	case strings.TrimSpace(a) == "":
		return b
	case strings.TrimSpace(b) == "":
		return a
	}
	return a + MergeSeparator + b
}

// MissingToolResult is the text of the tool result a request builder
// synthesizes for a tool call whose result is not in the history.
const MissingToolResult = "error: no result was recorded for this tool call"

// PairToolResults returns a copy of msgs in which every assistant message
// with tool calls is immediately followed by one tool message per call, in
// call order: results found later in the history are moved up, missing ones
// are synthesized with MissingToolResult, and tool messages answering no
// earlier call (for example because history was truncated) are dropped.
// Other messages keep their order. msgs is not modified.
func PairToolResults(msgs []Message) []Message {
	// Index tool results by call id; the first result for an id wins.
	results := make(map[string]int)
	for i, m := range msgs {
		if m.Role == RoleTool && m.ToolCallID != "" {
			if _, ok := results[m.ToolCallID]; !ok {
				results[m.ToolCallID] = i
			}
		}
	}
	used := make(map[int]bool)
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == RoleTool:
			// Emitted right after its call, or dropped as orphan/duplicate.
			continue
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
			out = append(out, m)
			for _, c := range m.ToolCalls {
				if j, ok := results[c.ID]; ok && !used[j] {
					used[j] = true
					out = append(out, msgs[j])
					continue
				}
				out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, Text: MissingToolResult})
			}
		default:
			out = append(out, m)
		}
	}
	return out
}

// Streamer is a Provider that can stream its answer: Stream is Complete,
// calling onText with each piece of answer text as it arrives, in order
// (never tool-call names or arguments). The Response is the whole answer:
// its Text is the pieces concatenated. onText is never called concurrently
// with itself, and not after Stream returned.
type Streamer interface {
	Provider
	Stream(ctx context.Context, req Request, onText func(delta string)) (Response, error)
}
