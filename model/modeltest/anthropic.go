package modeltest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/agentbot/agentbot/model"
)

// AnthropicFake is a strict loopback Messages API server. It rejects (400,
// Anthropic's error JSON) a missing max_tokens or model, a first message not
// from the user, roles that do not alternate, a tool_result that answers no
// tool_use of the immediately preceding assistant message, a tool_use
// without a tool_result in the next user message, a text block before a
// tool_result block, empty text blocks, and a final assistant message that
// ends with whitespace.
type AnthropicFake struct {
	fake
	// URL is the base URL for model.Config.BaseURL (no /v1 suffix).
	URL string
}

// NewAnthropicFake starts a fake closed at the end of the test. A non-empty
// apiKey is required as "X-Api-Key: <key>" or "Authorization: Bearer <key>".
func NewAnthropicFake(t testing.TB, apiKey string) *AnthropicFake {
	f := &AnthropicFake{}
	f.apiKey = apiKey
	f.srv = newServer(t, http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	return f
}

// Close stops the server (also done by test cleanup).
func (f *AnthropicFake) Close() { f.srv.Close() }

func anthropicError(w http.ResponseWriter, status int, msg string) {
	typ := "api_error"
	switch {
	case status == 400:
		typ = "invalid_request_error"
	case status == 401:
		typ = "authentication_error"
	case status == 403:
		typ = "permission_error"
	case status == 404:
		typ = "not_found_error"
	case status == 429:
		typ = "rate_limit_error"
	case status == 529:
		typ = "overloaded_error"
	}
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_fake",
	})
}

func (f *AnthropicFake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		anthropicError(w, http.StatusNotFound, "Not found: "+r.URL.Path)
		return
	}
	if f.apiKey != "" && r.Header.Get("X-Api-Key") != f.apiKey && r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		anthropicError(w, http.StatusUnauthorized, "invalid x-api-key")
		return
	}
	body, _, err := f.record(r)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "Invalid JSON")
		return
	}
	if msg := ValidateAnthropic(body); msg != "" {
		f.reject(msg)
		anthropicError(w, http.StatusBadRequest, msg)
		return
	}
	rep := f.reply(body)
	wait(r, rep.Delay)
	if rep.Status != 0 && rep.Status/100 != 2 {
		if rep.RetryAfter != "" {
			w.Header().Set("Retry-After", rep.RetryAfter)
		}
		anthropicError(w, rep.Status, rep.Message)
		return
	}
	if stream, _ := body["stream"].(bool); stream {
		f.stream(w, r, body, rep)
		return
	}
	var content []any
	if rep.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	stop := "end_turn"
	for _, c := range rep.ToolCalls {
		var input any = map[string]any{}
		if c.Arguments != "" {
			_ = json.Unmarshal([]byte(c.Arguments), &input)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
		stop = "tool_use"
	}
	if content == nil {
		content = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": anthropicUsage(rep.usage(), rep.usage().Output),
	})
}

// anthropicUsage reports u the Anthropic way: input_tokens excludes the
// tokens read from the cache.
func anthropicUsage(u model.Usage, output int64) map[string]any {
	return map[string]any{"input_tokens": u.Input - u.Cached, "cache_read_input_tokens": u.Cached, "output_tokens": output}
}

// blocks returns a message's content as blocks (a string is one text block).
func blocks(m map[string]any) []map[string]any {
	switch c := m["content"].(type) {
	case string:
		return []map[string]any{{"type": "text", "text": c}}
	case []any:
		var out []map[string]any
		for _, b := range c {
			bm, _ := b.(map[string]any)
			out = append(out, bm)
		}
		return out
	}
	return nil
}

// ValidateAnthropic returns why a strict Messages API would reject body, or "".
func ValidateAnthropic(body Body) string {
	if mt, ok := body["max_tokens"].(float64); !ok || mt < 1 {
		return "max_tokens: Field required"
	}
	if str(body["model"]) == "" {
		return "model: Field required"
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return "messages: at least one message is required"
	}
	var pendingUses []string
	for i := range msgs {
		uses, problem := anthropicMessage(msgs, i, pendingUses)
		if problem != "" {
			return problem
		}
		pendingUses = uses
	}
	return ""
}

// anthropicMessage validates message i of msgs, given the tool_use ids of
// the message before it; it returns the message's own tool_use ids.
func anthropicMessage(msgs []any, i int, pendingUses []string) (uses []string, problem string) {
	m, _ := msgs[i].(map[string]any)
	role := str(m["role"])
	if role != "user" && role != "assistant" {
		return nil, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
	}
	if i == 0 && role != "user" {
		return nil, "messages: first message must use the \"user\" role"
	}
	if i > 0 {
		prev, _ := msgs[i-1].(map[string]any)
		if str(prev["role"]) == role {
			return nil, fmt.Sprintf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", role)
		}
	}
	bs := blocks(m)
	if len(bs) == 0 {
		return nil, fmt.Sprintf("messages.%d: content must be non-empty", i)
	}
	answered := map[string]bool{}
	seenText := false
	for j, b := range bs {
		if p := anthropicBlock(b, i, j, role, pendingUses, &seenText, answered); p != "" {
			return nil, p
		}
		if str(b["type"]) == "tool_use" {
			uses = append(uses, str(b["id"]))
		}
	}
	if role == "user" {
		var missing []string
		for _, u := range pendingUses {
			if !answered[u] {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i-1, strings.Join(missing, ", "))
		}
	}
	if i == len(msgs)-1 && role == "assistant" {
		last := bs[len(bs)-1]
		if str(last["type"]) == "text" && strings.TrimRightFunc(str(last["text"]), unicode.IsSpace) != str(last["text"]) {
			return nil, "messages: final assistant content cannot end with trailing whitespace"
		}
	}
	return uses, ""
}

// anthropicBlock validates content block j of message i (of role): text
// seen so far and the tool_use ids answered are updated.
func anthropicBlock(b map[string]any, i, j int, role string, pendingUses []string, seenText *bool, answered map[string]bool) string {
	switch str(b["type"]) {
	case "text":
		if str(b["text"]) == "" {
			return fmt.Sprintf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
		}
		*seenText = true
	case "tool_use":
		if role != "assistant" {
			return fmt.Sprintf("messages.%d.content.%d: tool_use is only allowed in assistant messages", i, j)
		}
		if _, ok := b["input"].(map[string]any); !ok {
			return fmt.Sprintf("messages.%d.content.%d.input: Input should be a valid dictionary", i, j)
		}
	case "tool_result":
		if role != "user" {
			return fmt.Sprintf("messages.%d.content.%d: tool_result is only allowed in user messages", i, j)
		}
		if *seenText {
			return fmt.Sprintf("messages.%d: tool_result blocks must come before other content", i)
		}
		id := str(b["tool_use_id"])
		if !slices.Contains(pendingUses, id) {
			return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
		}
		answered[id] = true
	case "image":
		return anthropicImage(b, i, j, role)
	default:
		return fmt.Sprintf("messages.%d.content.%d: unknown block type %q", i, j, str(b["type"]))
	}
	return ""
}

// anthropicImage validates image block j of message i (of role).
func anthropicImage(b map[string]any, i, j int, role string) string {
	if role != "user" {
		return fmt.Sprintf("messages.%d.content.%d: image is only allowed in user messages", i, j)
	}
	src, _ := b["source"].(map[string]any)
	switch str(src["media_type"]) {
	case "image/png", "image/jpeg", "image/webp", "image/gif":
	default:
		return fmt.Sprintf("messages.%d.content.%d.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", i, j)
	}
	if _, err := base64.StdEncoding.DecodeString(str(src["data"])); str(src["type"]) != "base64" || err != nil || str(src["data"]) == "" {
		return fmt.Sprintf("messages.%d.content.%d.source: want a base64 source with data", i, j)
	}
	return ""
}

// stream answers a "stream": true request as Messages API events: a text
// block with one delta per chunk, then each tool_use block with its input
// as one input_json_delta, then message_delta and message_stop.
func (f *AnthropicFake) stream(w http.ResponseWriter, r *http.Request, body Body, rep Reply) {
	startSSE(w)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"], "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(rep.usage(), 0)}})
	idx := 0
	if chunks := rep.chunks(); len(chunks) > 0 {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for i, c := range chunks {
			if i > 0 {
				wait(r, rep.ChunkDelay)
			}
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}})
		}
		rep.cut()
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if rep.StreamError != "" {
		sse(w, "error", map[string]any{"type": "error", "error": map[string]any{"type": rep.StreamError, "message": "Overloaded"}})
		return
	}
	stop := "end_turn"
	for _, c := range rep.ToolCalls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rep.usage().Output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
