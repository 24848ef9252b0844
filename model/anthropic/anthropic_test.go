package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/anthropic"
	"github.com/agentbot/agentbot/model/modeltest"
)

const testKey = "sk-ant-test-0123456789abcdef"

func newProvider(t *testing.T, f *modeltest.AnthropicFake, key string, timeout time.Duration) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(model.Config{Provider: "anthropic", BaseURL: f.URL, APIKey: key, Model: "claude-test", Timeout: timeout},
		nil, option.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func user(name, text string) model.Message {
	return model.Message{Role: model.RoleUser, Name: name, Text: text}
}
func assistant(text string) model.Message {
	return model.Message{Role: model.RoleAssistant, Text: text}
}
func toolResult(id, text string) model.Message {
	return model.Message{Role: model.RoleTool, ToolCallID: id, Text: text}
}
func calls(text string, cs ...model.ToolCall) model.Message {
	return model.Message{Role: model.RoleAssistant, Text: text, ToolCalls: cs}
}

func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

type obj = map[string]any

func text(s string) obj { return obj{"type": "text", "text": s} }
func msg(role string, blocks ...obj) obj {
	return obj{"role": role, "content": blocks}
}
func use(id, name string, input obj) obj {
	return obj{"type": "tool_use", "id": id, "name": name, "input": input}
}
func result(id, s string) obj {
	return obj{"type": "tool_result", "tool_use_id": id, "content": []obj{text(s)}}
}

func TestReplay(t *testing.T) {
	listJobs := model.ToolCall{ID: "toolu_1", Name: "list_jobs", Arguments: "{}"}
	cancelJob := model.ToolCall{ID: "toolu_2", Name: "cancel_job", Arguments: `{"id":"j1"}`}
	tests := []struct {
		name string
		msgs []model.Message
		want []obj
	}{
		{
			name: "(a) adjacent assistant entries: job result after a reply",
			msgs: []model.Message{user("alice", "hi"), assistant("hello"), assistant("⏰ digest: 3 new issues"), user("alice", "why?")},
			want: []obj{msg("user", text("hi")), msg("assistant", text("hello\n\n⏰ digest: 3 new issues")), msg("user", text("why?"))},
		},
		{
			name: "(b) adjacent user entries",
			msgs: []model.Message{user("alice", "one"), user("bob", "two"), user("alice", "three")},
			want: []obj{msg("user", text("one\n\ntwo\n\nthree"))},
		},
		{
			name: "(c) tool call and result then assistant",
			msgs: []model.Message{user("", "jobs?"), calls("checking", listJobs, cancelJob), toolResult("toolu_1", "no jobs"),
				toolResult("toolu_2", "cancelled"), assistant("Done."), assistant("⏰ job result"), user("", "thanks")},
			want: []obj{msg("user", text("jobs?")),
				msg("assistant", text("checking"), use("toolu_1", "list_jobs", obj{}), use("toolu_2", "cancel_job", obj{"id": "j1"})),
				msg("user", result("toolu_1", "no jobs"), result("toolu_2", "cancelled")),
				msg("assistant", text("Done.\n\n⏰ job result")),
				msg("user", text("thanks"))},
		},
		{
			name: "(d) history starting with assistant",
			msgs: []model.Message{assistant("👋 intro"), user("", "hi")},
			want: []obj{msg("user", text(anthropic.Placeholder)), msg("assistant", text("👋 intro")), msg("user", text("hi"))},
		},
		{
			name: "tool result then user text share one user message, results first",
			msgs: []model.Message{user("", "go"), calls("", listJobs), user("", "still there?"), toolResult("toolu_1", "r")},
			want: []obj{msg("user", text("go")), msg("assistant", use("toolu_1", "list_jobs", obj{})),
				msg("user", result("toolu_1", "r"), text("still there?"))},
		},
		{
			name: "orphan result dropped, missing result synthesized, empty entries skipped",
			msgs: []model.Message{toolResult("gone", "orphan"), user("", "go"), assistant("  "), calls("", listJobs), user("", "ok")},
			want: []obj{msg("user", text("go")), msg("assistant", use("toolu_1", "list_jobs", obj{})),
				msg("user", result("toolu_1", model.MissingToolResult), text("ok"))},
		},
		{
			name: "trailing assistant prefill loses trailing whitespace",
			msgs: []model.Message{user("", "hi"), assistant("hello\n"), assistant("job result\n\n")},
			want: []obj{msg("user", text("hi")), msg("assistant", text("hello\n\n\njob result"))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewAnthropicFake(t, testKey)
			p := newProvider(t, f, testKey, 0)
			orig := append([]model.Message(nil), tt.msgs...)
			if _, err := p.Complete(context.Background(), model.Request{System: "be brief", Messages: tt.msgs}); err != nil {
				t.Fatalf("Complete: %v (rejections %v)", err, f.Rejections())
			}
			body := f.Last()
			if got, want := canon(t, body["messages"]), canon(t, tt.want); got != want {
				t.Fatalf("messages\n got %s\nwant %s", got, want)
			}
			if got, want := canon(t, body["system"]), canon(t, []obj{text("be brief")}); got != want {
				t.Fatalf("system %s", got)
			}
			if body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
				t.Fatalf("max_tokens %v", body["max_tokens"])
			}
			if !reflect.DeepEqual(orig, tt.msgs) {
				t.Fatal("request messages were modified")
			}
		})
	}
}

func TestStrictFakeRejects(t *testing.T) {
	u := func(bs ...obj) obj { return msg("user", bs...) }
	a := func(bs ...obj) obj { return msg("assistant", bs...) }
	bad := map[string]obj{
		"missing max_tokens": {"model": "m", "messages": []obj{u(text("x"))}},
		"first not user":     {"model": "m", "max_tokens": 5, "messages": []obj{a(text("x")), u(text("y"))}},
		"adjacent assistant": {"model": "m", "max_tokens": 5, "messages": []obj{u(text("x")), a(text("y")), a(text("z"))}},
		"adjacent user":      {"model": "m", "max_tokens": 5, "messages": []obj{u(text("x")), u(text("y"))}},
		"orphan tool_result": {"model": "m", "max_tokens": 5, "messages": []obj{u(text("x")), a(text("y")), u(result("t1", "r"))}},
		"unanswered tool_use": {"model": "m", "max_tokens": 5, "messages": []obj{u(text("x")),
			a(use("t1", "f", obj{})), u(text("y"))}},
		"empty text": {"model": "m", "max_tokens": 5, "messages": []obj{u(text(""))}},
	}
	for name, b := range bad {
		var x modeltest.Body
		_ = json.Unmarshal([]byte(canon(t, b)), &x)
		if modeltest.ValidateAnthropic(x) == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRequestFieldsAndToolCalls(t *testing.T) {
	f := modeltest.NewAnthropicFake(t, testKey)
	f.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "let me check", ToolCalls: []model.ToolCall{
			{ID: "toolu_a", Name: "list_jobs", Arguments: "{}"},
			{ID: "toolu_b", Name: "cancel_job", Arguments: `{"id":"j1"}`},
		}}
	})
	p := newProvider(t, f, testKey, 0)
	got, err := p.Complete(context.Background(), model.Request{
		Messages:  []model.Message{user("", "hi")},
		MaxTokens: 300,
		Tools: []model.Tool{
			{Name: "cancel_job", Description: "Cancel a job", Parameters: map[string]any{
				"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}},
				"required": []string{"id"}, "additionalProperties": false}},
			{Name: "list_jobs"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Response{Text: "let me check", ToolCalls: []model.ToolCall{
		{ID: "toolu_a", Name: "list_jobs", Arguments: "{}"},
		{ID: "toolu_b", Name: "cancel_job", Arguments: `{"id":"j1"}`},
	}, Usage: model.Usage{Input: 1, Output: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	b := f.Last()
	if b["model"] != "claude-test" || b["max_tokens"] != float64(300) {
		t.Fatalf("body %v", b)
	}
	wantTools := []obj{
		{"name": "cancel_job", "description": "Cancel a job", "input_schema": obj{"type": "object",
			"properties": obj{"id": obj{"type": "string"}}, "required": []string{"id"}, "additionalProperties": false}},
		{"name": "list_jobs", "input_schema": obj{"type": "object", "properties": obj{}}},
	}
	if g, w := canon(t, b["tools"]), canon(t, wantTools); g != w {
		t.Fatalf("tools\n got %s\nwant %s", g, w)
	}
	if _, ok := b["system"]; ok {
		t.Fatal("empty system prompt was sent")
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		reply    modeltest.Reply
		key      string
		timeout  time.Duration
		sentinel error
		kind     model.ErrorKind
		status   int
		userText string
	}{
		{"wrong key", modeltest.Reply{}, "sk-ant-wrong-000000", 0, model.ErrAuth, model.KindAuth, 401, "rejected the API key"},
		{"401 echoing key", modeltest.Reply{Status: 401, Message: "invalid x-api-key " + testKey}, testKey, 0, model.ErrAuth, model.KindAuth, 401, "rejected the API key"},
		{"429", modeltest.Reply{Status: 429, Message: "rate limited " + testKey}, testKey, 0, model.ErrRateLimited, model.KindRateLimit, 429, "try again in a moment"},
		{"500", modeltest.Reply{Status: 500, Message: "internal"}, testKey, 0, model.ErrServer, model.KindServer, 500, "server error"},
		{"529 overloaded", modeltest.Reply{Status: 529, Message: "overloaded"}, testKey, 0, model.ErrServer, model.KindServer, 529, "server error"},
		{"slow", modeltest.Reply{Delay: 5 * time.Second}, testKey, 50 * time.Millisecond, model.ErrTimeout, model.KindTimeout, 0, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewAnthropicFake(t, testKey)
			f.Respond(func(modeltest.Body) modeltest.Reply { return tt.reply })
			p := newProvider(t, f, tt.key, tt.timeout)
			_, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}})
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if me.Kind != tt.kind || me.Status != tt.status || me.Provider != "anthropic" || !errors.Is(err, tt.sentinel) {
				t.Fatalf("got kind=%s status=%d provider=%s: %v", me.Kind, me.Status, me.Provider, err)
			}
			ut := me.UserMessage()
			if !strings.Contains(ut, tt.userText) {
				t.Fatalf("UserMessage = %q", ut)
			}
			for _, s := range []string{ut, err.Error()} {
				if strings.Contains(s, testKey) || strings.Contains(s, tt.key) {
					t.Fatalf("key leaked: %q", s)
				}
			}
		})
	}
}

func TestBadRequestFromFake(t *testing.T) {
	// A request the builder cannot fix (no messages at all) reaches the
	// strict fake, whose 400 maps to KindBadRequest.
	f := modeltest.NewAnthropicFake(t, testKey)
	p := newProvider(t, f, testKey, 0)
	_, err := p.Complete(context.Background(), model.Request{})
	if !errors.Is(err, model.ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigRequired(t *testing.T) {
	if _, err := anthropic.New(model.Config{APIKey: "k"}, nil); err == nil {
		t.Fatal("want error without model")
	}
	if _, err := anthropic.New(model.Config{Model: "m"}, nil); err == nil {
		t.Fatal("want error without key")
	}
}

// A user message's images reach the Messages API as base64 image blocks
// before the text.
func TestImagesSentAsImageBlocks(t *testing.T) {
	f := modeltest.NewAnthropicFake(t, testKey)
	p := newProvider(t, f, testKey, 0)
	m := model.Message{Role: model.RoleUser, Text: "what is this?", Images: []model.Image{{MediaType: "image/jpeg", Data: []byte("JPG")}}}
	if _, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{m}}); err != nil {
		t.Fatal(err)
	}
	content := f.Last()["messages"].([]any)[0].(map[string]any)["content"].([]any)
	img := content[0].(map[string]any)
	src, _ := img["source"].(map[string]any)
	if img["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/jpeg" || src["data"] != "SlBH" {
		t.Fatalf("first block %v, want the image", img)
	}
	if txt := content[1].(map[string]any); txt["type"] != "text" || txt["text"] != "what is this?" {
		t.Fatalf("second block %v, want the text", txt)
	}
}

// TestStream: a streamed message hands each text delta to onText (never
// tool_use input), sends "stream": true, and returns the whole answer.
func TestStream(t *testing.T) {
	one := model.Usage{Input: 1, Output: 1}
	tests := []struct {
		name  string
		reply modeltest.Reply
		want  model.Response
		texts []string
	}{
		{"text", modeltest.Reply{Chunks: []string{"Hel", "lo ", "world"}},
			model.Response{Text: "Hello world", Usage: one}, []string{"Hel", "lo ", "world"}},
		{"text then tool", modeltest.Reply{Chunks: []string{"Let me look."}, ToolCalls: []model.ToolCall{{ID: "tu1", Name: "list_jobs", Arguments: `{"a":1}`}}},
			model.Response{Text: "Let me look.", ToolCalls: []model.ToolCall{{ID: "tu1", Name: "list_jobs", Arguments: `{"a":1}`}}, Usage: one}, []string{"Let me look."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewAnthropicFake(t, testKey)
			f.Respond(func(modeltest.Body) modeltest.Reply { return tt.reply })
			var texts []string
			got, err := newProvider(t, f, testKey, 0).Stream(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, func(s string) { texts = append(texts, s) })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(texts, tt.texts) {
				t.Fatalf("got %#v texts %q\nwant %#v texts %q", got, texts, tt.want, tt.texts)
			}
			if s, _ := f.Last()["stream"].(bool); !s {
				t.Fatalf("request did not ask to stream: %v", f.Last())
			}
		})
	}
}

// TestUsage: the tokens the provider reports (cached ones included in the
// input) come back on the response, from a plain and a streamed call.
func TestUsage(t *testing.T) {
	want := model.Usage{Input: 1200, Output: 34, Cached: 1000}
	f := modeltest.NewAnthropicFake(t, testKey)
	f.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{Text: "hi", Usage: want} })
	p := newProvider(t, f, testKey, 0)
	req := model.Request{Messages: []model.Message{user("", "hi")}}
	got, err := p.Complete(context.Background(), req)
	if err != nil || got.Usage != want {
		t.Fatalf("Complete: usage %+v err %v, want %+v", got.Usage, err, want)
	}
	got, err = p.Stream(context.Background(), req, func(string) {})
	if err != nil || got.Usage != want {
		t.Fatalf("Stream: usage %+v err %v, want %+v", got.Usage, err, want)
	}
}

// TestStreamErrorEvent: an error event inside a streamed 200 response is
// classified by its type (overloaded: a server error another model may
// answer; rate limit), not left unknown.
func TestStreamErrorEvent(t *testing.T) {
	for typ, want := range map[string]error{"overloaded_error": model.ErrServer, "rate_limit_error": model.ErrRateLimited, "api_error": model.ErrServer} {
		f := modeltest.NewAnthropicFake(t, testKey)
		f.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{StreamError: typ} })
		_, err := newProvider(t, f, testKey, 0).Stream(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}}, func(string) {})
		if !errors.Is(err, want) || !model.Retryable(err) {
			t.Errorf("%s: err %v, want %v (retryable)", typ, err, want)
		}
	}
}
