package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/model/openai"
)

const testKey = "sk-test-0123456789abcdef"

func newProvider(t *testing.T, f *modeltest.OpenAIFake, timeout time.Duration) *openai.Provider {
	t.Helper()
	p, err := openai.New(model.Config{Provider: "openai", BaseURL: f.URL, APIKey: testKey, Model: "test-model", Timeout: timeout},
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

// canon re-encodes v so that JSON texts can be compared.
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

func fnCall(id, name, args string) obj {
	return obj{"id": id, "type": "function", "function": obj{"name": name, "arguments": args}}
}

func TestReplay(t *testing.T) {
	sys := obj{"role": "system", "content": "be brief"}
	listJobs := model.ToolCall{ID: "call_1", Name: "list_jobs", Arguments: "{}"}
	tests := []struct {
		name string
		msgs []model.Message
		want []obj
	}{
		{
			name: "(a) adjacent assistant entries: job result after a reply",
			msgs: []model.Message{user("alice", "hi"), assistant("hello"), assistant("⏰ digest: 3 new issues"), user("alice", "why?")},
			want: []obj{sys, {"role": "user", "content": "hi", "name": "alice"},
				{"role": "assistant", "content": "hello\n\n⏰ digest: 3 new issues"},
				{"role": "user", "content": "why?", "name": "alice"}},
		},
		{
			name: "(b) adjacent user entries from two authors",
			msgs: []model.Message{user("alice", "one"), user("Bob Smith", "two"), user("alice", "three")},
			want: []obj{sys, {"role": "user", "content": "one\n\ntwo\n\nthree"}},
		},
		{
			name: "(b) adjacent user entries from one author keep the name",
			msgs: []model.Message{user("Bob Smith", "one"), user("Bob Smith", "two")},
			want: []obj{sys, {"role": "user", "content": "one\n\ntwo", "name": "Bob_Smith"}},
		},
		{
			name: "(c) tool call and result then assistant",
			msgs: []model.Message{user("", "jobs?"), calls("", listJobs), toolResult("call_1", "no jobs"), assistant("You have no jobs."), assistant("⏰ job result")},
			want: []obj{sys, {"role": "user", "content": "jobs?"},
				{"role": "assistant", "tool_calls": []any{fnCall("call_1", "list_jobs", "{}")}},
				{"role": "tool", "tool_call_id": "call_1", "content": "no jobs"},
				{"role": "assistant", "content": "You have no jobs.\n\n⏰ job result"}},
		},
		{
			name: "(d) history starting with assistant",
			msgs: []model.Message{assistant("👋 intro"), assistant("notice"), user("", "hi")},
			want: []obj{sys, {"role": "assistant", "content": "👋 intro\n\nnotice"}, {"role": "user", "content": "hi"}},
		},
		{
			name: "assistant text merges into a following tool-call message, never the other way",
			msgs: []model.Message{user("", "go"), assistant("on it"), calls("checking", listJobs), toolResult("call_1", "r"), assistant("done")},
			want: []obj{sys, {"role": "user", "content": "go"},
				{"role": "assistant", "content": "on it\n\nchecking", "tool_calls": []any{fnCall("call_1", "list_jobs", "{}")}},
				{"role": "tool", "tool_call_id": "call_1", "content": "r"},
				{"role": "assistant", "content": "done"}},
		},
		{
			name: "user message between call and result; orphan result dropped; missing result synthesized",
			msgs: []model.Message{toolResult("gone", "orphan"), user("", "go"), calls("", listJobs), user("", "still there?"),
				toolResult("call_1", "r"), calls("", model.ToolCall{ID: "call_2", Name: "cancel_job", Arguments: `{"id":"j1"}`}), user("", "ok")},
			want: []obj{sys, {"role": "user", "content": "go"},
				{"role": "assistant", "tool_calls": []any{fnCall("call_1", "list_jobs", "{}")}},
				{"role": "tool", "tool_call_id": "call_1", "content": "r"},
				{"role": "user", "content": "still there?"},
				{"role": "assistant", "tool_calls": []any{fnCall("call_2", "cancel_job", `{"id":"j1"}`)}},
				{"role": "tool", "tool_call_id": "call_2", "content": model.MissingToolResult},
				{"role": "user", "content": "ok"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewOpenAIFake(t, testKey)
			p := newProvider(t, f, 0)
			orig := append([]model.Message(nil), tt.msgs...)
			if _, err := p.Complete(context.Background(), model.Request{System: "be brief", Messages: tt.msgs}); err != nil {
				t.Fatalf("Complete: %v (rejections %v)", err, f.Rejections())
			}
			if got, want := canon(t, f.Last()["messages"]), canon(t, tt.want); got != want {
				t.Fatalf("messages\n got %s\nwant %s", got, want)
			}
			if !reflect.DeepEqual(orig, tt.msgs) {
				t.Fatal("request messages were modified")
			}
		})
	}
}

// TestStrictFakeRejectsUnmergedHistory shows the fake would catch a builder
// that sent the transcript as stored.
func TestStrictFakeRejectsUnmergedHistory(t *testing.T) {
	bad := []modeltest.Body{
		{"model": "m", "messages": []any{obj{"role": "user", "content": "a"}, obj{"role": "assistant", "content": "b"}, obj{"role": "assistant", "content": "c"}}},
		{"model": "m", "messages": []any{obj{"role": "user", "content": "a"}, obj{"role": "user", "content": "b"}}},
		{"model": "m", "messages": []any{obj{"role": "user", "content": "a"}, obj{"role": "tool", "tool_call_id": "x", "content": "b"}}},
		{"model": "m", "messages": []any{obj{"role": "user", "content": "a"}, obj{"role": "assistant", "tool_calls": []any{fnCall("x", "f", "{}")}}, obj{"role": "user", "content": "b"}}},
	}
	for i, b := range bad {
		// Round-trip through JSON so that the body looks decoded.
		var x modeltest.Body
		_ = json.Unmarshal([]byte(canon(t, b)), &x)
		if modeltest.ValidateOpenAI(x) == "" {
			t.Errorf("case %d accepted", i)
		}
	}
}

func TestRequestFields(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, testKey)
	p := newProvider(t, f, 0)
	_, err := p.Complete(context.Background(), model.Request{
		Messages:  []model.Message{user("", "hi")},
		MaxTokens: 256,
		Tools: []model.Tool{
			{Name: "send_message", Description: "Send a message", Parameters: map[string]any{
				"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}}, "required": []any{"to"}}},
			{Name: "list_jobs"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := f.Last()
	if b["model"] != "test-model" || b["max_tokens"] != float64(256) {
		t.Fatalf("body %v", b)
	}
	want := []obj{
		{"type": "function", "function": obj{"name": "send_message", "description": "Send a message", "parameters": obj{
			"type": "object", "properties": obj{"to": obj{"type": "string"}}, "required": []any{"to"}}}},
		{"type": "function", "function": obj{"name": "list_jobs", "parameters": obj{"type": "object", "properties": obj{}}}},
	}
	if got, w := canon(t, b["tools"]), canon(t, want); got != w {
		t.Fatalf("tools\n got %s\nwant %s", got, w)
	}
	if _, ok := b["messages"].([]any)[0].(map[string]any)["role"]; !ok {
		t.Fatal("no role")
	}
}

func TestToolCallsParsed(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, testKey)
	f.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "let me check", ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "list_jobs", Arguments: "{}"},
			{ID: "call_b", Name: "cancel_job", Arguments: `{"id":"j1"}`},
		}}
	})
	p := newProvider(t, f, 0)
	got, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Response{Text: "let me check", ToolCalls: []model.ToolCall{
		{ID: "call_a", Name: "list_jobs", Arguments: "{}"},
		{ID: "call_b", Name: "cancel_job", Arguments: `{"id":"j1"}`},
	}, Usage: model.Usage{Input: 1, Output: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
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
		{"wrong key", modeltest.Reply{}, "sk-wrong-key-000000", 0, model.ErrAuth, model.KindAuth, 401, "rejected the API key"},
		{"401", modeltest.Reply{Status: 401, Message: "Incorrect API key provided: " + testKey}, testKey, 0, model.ErrAuth, model.KindAuth, 401, "rejected the API key"},
		{"403", modeltest.Reply{Status: 403, Message: "forbidden"}, testKey, 0, model.ErrAuth, model.KindAuth, 403, "rejected the API key"},
		{"429", modeltest.Reply{Status: 429, Message: "Rate limit reached for " + testKey}, testKey, 0, model.ErrRateLimited, model.KindRateLimit, 429, "try again in a moment"},
		{"500", modeltest.Reply{Status: 500, Message: "boom"}, testKey, 0, model.ErrServer, model.KindServer, 500, "server error"},
		{"404 model", modeltest.Reply{Status: 404, Message: "model not found"}, testKey, 0, model.ErrBadRequest, model.KindBadRequest, 404, "rejected the request"},
		{"slow", modeltest.Reply{Delay: 5 * time.Second}, testKey, 50 * time.Millisecond, model.ErrTimeout, model.KindTimeout, 0, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewOpenAIFake(t, testKey)
			f.Respond(func(modeltest.Body) modeltest.Reply { return tt.reply })
			p, err := openai.New(model.Config{BaseURL: f.URL, APIKey: tt.key, Model: "m", Timeout: tt.timeout}, nil, option.WithMaxRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}})
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if me.Kind != tt.kind || me.Status != tt.status || me.Provider != "openai" || !errors.Is(err, tt.sentinel) {
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

func TestUnreachable(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, "")
	f.Close()
	p, _ := openai.New(model.Config{BaseURL: f.URL, APIKey: testKey, Model: "m"}, nil, option.WithMaxRetries(0))
	_, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}})
	var me *model.Error
	if !errors.Is(err, model.ErrServer) || !errors.As(err, &me) || !strings.Contains(me.UserMessage(), "could not be reached") {
		t.Fatalf("err = %v (%T)", err, err)
	}
}

func TestCanceled(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, "")
	p := newProvider(t, f, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Complete(ctx, model.Request{Messages: []model.Message{user("", "hi")}})
	if !errors.Is(err, model.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestModelRequired(t *testing.T) {
	if _, err := openai.New(model.Config{}, nil); err == nil {
		t.Fatal("want error")
	}
}

// A user message's images reach Chat Completions as image_url parts (data
// URLs) after the text.
func TestImagesSentAsImageURLParts(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, testKey)
	p := newProvider(t, f, 0)
	m := user("", "what is this?")
	m.Images = []model.Image{{MediaType: "image/png", Data: []byte("PNGDATA")}}
	if _, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{m}}); err != nil {
		t.Fatal(err)
	}
	msgs := f.Last()["messages"].([]any)
	want := []obj{{"role": "user", "content": []any{
		obj{"type": "text", "text": "what is this?"},
		obj{"type": "image_url", "image_url": obj{"url": "data:image/png;base64,UE5HREFUQQ=="}},
	}}}
	if got, w := canon(t, msgs), canon(t, want); got != w {
		t.Fatalf("messages\n got %s\nwant %s", got, w)
	}
}

// TestStream: a streamed completion hands each content delta to onText
// (never the tool call), sends "stream": true, and returns the whole answer.
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
		{"text then tool", modeltest.Reply{Chunks: []string{"Let me look."}, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_jobs", Arguments: `{"a":1}`}}},
			model.Response{Text: "Let me look.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_jobs", Arguments: `{"a":1}`}}, Usage: one}, []string{"Let me look."}},
		{"tool only", modeltest.Reply{ToolCalls: []model.ToolCall{{ID: "c1", Name: "x", Arguments: `{}`}}},
			model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "x", Arguments: `{}`}}, Usage: one}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := modeltest.NewOpenAIFake(t, testKey)
			f.Respond(func(modeltest.Body) modeltest.Reply { return tt.reply })
			var texts []string
			got, err := newProvider(t, f, 0).Stream(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}}, func(s string) { texts = append(texts, s) })
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

func TestStreamError(t *testing.T) {
	f := modeltest.NewOpenAIFake(t, testKey)
	f.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{Status: 429, Message: "slow down"} })
	_, err := newProvider(t, f, 0).Stream(context.Background(), model.Request{Messages: []model.Message{user("", "hi")}}, func(string) { t.Fatal("text on error") })
	if !errors.Is(err, model.ErrRateLimited) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err = %v", err)
	}
}

// TestUsage: the tokens the provider reports (cached ones included in the
// input) come back on the response, from a plain and a streamed call.
func TestUsage(t *testing.T) {
	want := model.Usage{Input: 1200, Output: 34, Cached: 1000}
	f := modeltest.NewOpenAIFake(t, testKey)
	f.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{Text: "hi", Usage: want} })
	p := newProvider(t, f, 0)
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
