package echo_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
)

func user(t string) model.Message      { return model.Message{Role: model.RoleUser, Text: t} }
func assistant(t string) model.Message { return model.Message{Role: model.RoleAssistant, Text: t} }

func TestComplete(t *testing.T) {
	callsMsg := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
		{ID: "call_1", Name: "list_jobs", Arguments: "{}"},
		{ID: "call_2", Name: "send_message", Arguments: `{"to":"channel:1","text":"hi"}`},
	}}
	tests := []struct {
		name string
		req  model.Request
		want model.Response
	}{
		{"echo", model.Request{Messages: []model.Message{user("hello")}}, model.Response{Text: "echo: hello"}},
		{"no user", model.Request{}, model.Response{Text: "echo: (no user message)"}},
		{"last user after adjacent assistants",
			model.Request{Messages: []model.Message{user("one"), assistant("a"), assistant("job result")}},
			model.Response{Text: "echo: one"}},
		{"adjacent users: last one", model.Request{Messages: []model.Message{user("one"), user("two")}},
			model.Response{Text: "echo: two"}},
		{"one tool", model.Request{Messages: []model.Message{user("please\n!tool list_jobs")}},
			model.Response{ToolCalls: []model.ToolCall{{ID: "call_1", Name: "list_jobs", Arguments: "{}"}}}},
		{"two tools", model.Request{Messages: []model.Message{user(`!tool list_jobs {}` + "\n" + `  !tool send_message {"to":"channel:1","text":"hi"}`)}},
			model.Response{ToolCalls: callsMsg.ToolCalls}},
		{"ids continue after history", model.Request{Messages: []model.Message{
			user("!tool a"), {Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Name: "a", Arguments: "{}"}}},
			{Role: model.RoleTool, ToolCallID: "call_1", Text: "ok"}, assistant("done"), user("!tool b {\"x\":1}")}},
			model.Response{ToolCalls: []model.ToolCall{{ID: "call_2", Name: "b", Arguments: `{"x":1}`}}}},
		{"tool results summary", model.Request{Messages: []model.Message{user("x"), callsMsg,
			{Role: model.RoleTool, ToolCallID: "call_1", Text: "no jobs"},
			{Role: model.RoleTool, ToolCallID: "call_2", Text: "sent"}}},
			model.Response{Text: "tool results:\n- list_jobs: no jobs\n- send_message: sent"}},
		{"orphan tool result uses id", model.Request{Messages: []model.Message{{Role: model.RoleTool, ToolCallID: "c9", Text: "r"}}},
			model.Response{Text: "tool results:\n- c9: r"}},
		{"task in user text", model.Request{Messages: []model.Message{user("Task: count the jobs ")}},
			model.Response{Text: "Done: count the jobs"}},
		{"task in system", model.Request{System: "You are a subagent.\nTask: summarize the thread\n", Messages: []model.Message{user("go")}},
			model.Response{Text: "Done: summarize the thread"}},
		{"tool only from last message", model.Request{Messages: []model.Message{user("!tool a"), assistant("x")}},
			model.Response{Text: "echo: !tool a"}},
	}
	p := echo.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestFail(t *testing.T) {
	tests := []struct {
		line     string
		sentinel error
		kind     model.ErrorKind
		status   int
	}{
		{"!fail auth", model.ErrAuth, model.KindAuth, 401},
		{"!fail rate-limit", model.ErrRateLimited, model.KindRateLimit, 429},
		{"!fail server", model.ErrServer, model.KindServer, 500},
		{"!fail timeout", model.ErrTimeout, model.KindTimeout, 0},
		{"!fail bad-request", model.ErrBadRequest, model.KindBadRequest, 400},
		{"!fail canceled", model.ErrCanceled, model.KindCanceled, 0},
		{"!fail whatever", nil, model.KindUnknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := echo.New().Complete(context.Background(), model.Request{Messages: []model.Message{user("hi\n" + tt.line)}})
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != tt.kind || me.Status != tt.status || me.Provider != "echo" {
				t.Fatalf("err = %#v", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tt.sentinel)
			}
			if me.UserMessage() == "" {
				t.Fatal("empty UserMessage")
			}
		})
	}
}

func TestBadToolArgs(t *testing.T) {
	_, err := echo.New().Complete(context.Background(), model.Request{Messages: []model.Message{user("!tool x [1]")}})
	if !errors.Is(err, model.ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
}

func TestDoesNotModifyRequest(t *testing.T) {
	msgs := []model.Message{user("!tool a"), user("b")}
	cp := append([]model.Message(nil), msgs...)
	if _, err := echo.New().Complete(context.Background(), model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(msgs, cp) {
		t.Fatal("request modified")
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := echo.New().Complete(ctx, model.Request{Messages: []model.Message{user("x")}})
	if !errors.Is(err, model.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamPieces(t *testing.T) {
	req := model.Request{Messages: []model.Message{user("one two\nthree  four")}}
	var got []string
	resp, err := echo.New().Stream(context.Background(), req, func(s string) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"echo: ", "one ", "two\n", "three  ", "four"}
	if !reflect.DeepEqual(got, want) || resp.Text != "echo: one two\nthree  four" {
		t.Fatalf("pieces %q, text %q", got, resp.Text)
	}
	if _, err := echo.New().Stream(context.Background(), model.Request{Messages: []model.Message{user("!fail server")}}, func(string) { t.Fatal("text on failure") }); !errors.Is(err, model.ErrServer) {
		t.Fatalf("err = %v", err)
	}
}
