package modeltest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/model"
)

// OpenAIFake is a strict loopback Chat Completions server in the manner of
// vLLM chat templates: it rejects (400) a system message that is not first,
// adjacent user/user or assistant/assistant messages, a tool message whose
// tool_call_id answers no pending call of the preceding assistant message,
// an assistant tool_calls message not followed by a result for each call,
// and a missing model or empty messages.
type OpenAIFake struct {
	fake
	// URL is the base URL for model.Config.BaseURL (ends in /v1).
	URL string
}

// NewOpenAIFake starts a fake closed at the end of the test. A non-empty
// apiKey is required as "Authorization: Bearer <key>".
func NewOpenAIFake(t testing.TB, apiKey string) *OpenAIFake {
	f := &OpenAIFake{}
	f.apiKey = apiKey
	f.srv = newServer(t, http.HandlerFunc(f.serve))
	f.URL = f.srv.URL + "/v1"
	return f
}

// Close stops the server (also done by test cleanup).
func (f *OpenAIFake) Close() { f.srv.Close() }

func openAIError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": status,
	}})
}

func (f *OpenAIFake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		openAIError(w, http.StatusNotFound, "NotFoundError", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if f.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	body, _, err := f.record(r)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body")
		return
	}
	if msg := ValidateOpenAI(body); msg != "" {
		f.reject(msg)
		openAIError(w, http.StatusBadRequest, "BadRequestError", msg)
		return
	}
	rep := f.reply(body)
	wait(r, rep.Delay)
	if rep.Status != 0 && rep.Status/100 != 2 {
		if rep.RetryAfter != "" {
			w.Header().Set("Retry-After", rep.RetryAfter)
		}
		openAIError(w, rep.Status, "error", rep.Message)
		return
	}
	if stream, _ := body["stream"].(bool); stream {
		f.stream(w, r, body, rep)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		var calls []any
		for _, c := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"],
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   openAIUsage(rep.usage()),
	})
}

func openAIUsage(u model.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached}}
}

// ValidateOpenAI returns why a strict server would reject body, or "".
func ValidateOpenAI(body Body) string {
	if str(body["model"]) == "" {
		return "model is required"
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return "messages must not be empty"
	}
	prev := ""
	var pending []string // tool_call ids awaiting results
	for i, raw := range msgs {
		m, _ := raw.(map[string]any)
		role := str(m["role"])
		if len(pending) > 0 && role != "tool" {
			return fmt.Sprintf("messages[%d]: tool_calls %s must be followed by tool messages", i, strings.Join(pending, ","))
		}
		switch role {
		case "system":
			if i != 0 {
				return fmt.Sprintf("messages[%d]: system message must be first", i)
			}
		case "user", "assistant":
			if role == prev {
				return "Conversation roles must alternate user/assistant/user/assistant/..."
			}
			if role == "assistant" {
				calls, _ := m["tool_calls"].([]any)
				for _, c := range calls {
					cm, _ := c.(map[string]any)
					pending = append(pending, str(cm["id"]))
				}
			}
		case "tool":
			id := str(m["tool_call_id"])
			found := -1
			for j, p := range pending {
				if p == id {
					found = j
				}
			}
			if found < 0 {
				return fmt.Sprintf("messages[%d]: tool message with tool_call_id %q has no preceding tool call", i, id)
			}
			pending = append(pending[:found], pending[found+1:]...)
		default:
			return fmt.Sprintf("messages[%d]: unknown role %q", i, role)
		}
		prev = role
	}
	if len(pending) > 0 {
		return "tool_calls must be followed by tool messages"
	}
	return ""
}

// stream answers a "stream": true request as server-sent chunks: the
// text deltas, then each tool call (id and name, then its arguments),
// then the finish reason and [DONE].
func (f *OpenAIFake) stream(w http.ResponseWriter, r *http.Request, body Body, rep Reply) {
	startSSE(w)
	chunk := func(delta map[string]any, finish any) {
		sse(w, "", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, c := range rep.chunks() {
		if i > 0 {
			wait(r, rep.ChunkDelay)
		}
		chunk(map[string]any{"content": c}, nil)
	}
	rep.cut()
	finish := "stop"
	for i, c := range rep.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": c.Arguments}}}}, nil)
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] == true {
		sse(w, "", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
			"choices": []any{}, "usage": openAIUsage(rep.usage())})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}
