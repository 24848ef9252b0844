package model_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbot/agentbot/model"
)

func TestKindForStatus(t *testing.T) {
	tests := map[int]model.ErrorKind{
		400: model.KindBadRequest, 401: model.KindAuth, 403: model.KindAuth, 404: model.KindBadRequest,
		408: model.KindTimeout, 422: model.KindBadRequest, 429: model.KindRateLimit, 500: model.KindServer,
		502: model.KindServer, 503: model.KindServer, 504: model.KindTimeout, 418: model.KindUnknown,
	}
	for status, want := range tests {
		if got := model.KindForStatus(status); got != want {
			t.Errorf("KindForStatus(%d) = %s, want %s", status, got, want)
		}
	}
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestKindForError(t *testing.T) {
	tests := []struct {
		err  error
		want model.ErrorKind
	}{
		{context.DeadlineExceeded, model.KindTimeout},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), model.KindTimeout},
		{&net.OpError{Op: "read", Err: netTimeout{}}, model.KindTimeout},
		{context.Canceled, model.KindCanceled},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, model.KindServer},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), model.KindServer},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), model.KindServer},
		{fmt.Errorf(`Post "http://x": %w`, io.ErrUnexpectedEOF), model.KindServer},
		{errors.New("boom"), model.KindUnknown},
	}
	for _, tt := range tests {
		if got := model.KindForError(tt.err); got != tt.want {
			t.Errorf("KindForError(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestErrorIsAndRedaction(t *testing.T) {
	const key = "sk-secret-123"
	inner := errors.New("401 Unauthorized: invalid key " + key)
	err := model.NewError("openai", 401, inner, key)
	if !errors.Is(err, model.ErrAuth) || errors.Is(err, model.ErrServer) {
		t.Fatalf("Is mismatch for %v", err)
	}
	if !errors.Is(err, inner) {
		t.Fatal("underlying error not reachable")
	}
	for _, s := range []string{err.Error(), err.UserMessage(), fmt.Sprintf("%v", err)} {
		if strings.Contains(s, key) {
			t.Fatalf("key leaked: %q", s)
		}
	}
	if !strings.Contains(err.Error(), "openai: auth (HTTP 401)") {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestUserMessage(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&model.Error{Kind: model.KindAuth, Status: 401}, "rejected the API key"},
		{&model.Error{Kind: model.KindRateLimit, Status: 429}, "rate limiting"},
		{&model.Error{Kind: model.KindServer, Status: 503}, "server error"},
		{&model.Error{Kind: model.KindServer}, "could not be reached"},
		{&model.Error{Kind: model.KindTimeout}, "too long"},
		{&model.Error{Kind: model.KindBadRequest, Status: 400}, "rejected the request"},
		{fmt.Errorf("turn: %w", &model.Error{Kind: model.KindRateLimit}), "rate limiting"},
		{context.DeadlineExceeded, "too long"},
		{errors.New("other"), "failed"},
	}
	for _, tt := range tests {
		var me *model.Error
		if !errors.As(model.Classified(tt.err), &me) {
			t.Fatalf("Classified(%v) is no *model.Error", tt.err)
		}
		if got := me.UserMessage(); !strings.Contains(got, tt.want) {
			t.Errorf("UserMessage of %v = %q, want it to contain %q", tt.err, got, tt.want)
		}
	}
	if model.Classified(nil) != nil {
		t.Error("Classified(nil) is not nil")
	}
}

func TestJoinText(t *testing.T) {
	if got := model.JoinText("a", "b"); got != "a\n\nb" {
		t.Fatalf("got %q", got)
	}
	if got := model.JoinText("", "b"); got != "b" {
		t.Fatalf("got %q", got)
	}
	if got := model.JoinText("a", " "); got != "a" {
		t.Fatalf("got %q", got)
	}
}

func TestPairToolResults(t *testing.T) {
	call := func(ids ...string) model.Message {
		m := model.Message{Role: model.RoleAssistant, Text: "calling"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: id, Name: "t", Arguments: "{}"})
		}
		return m
	}
	res := func(id, text string) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: id, Text: text}
	}
	u := model.Message{Role: model.RoleUser, Text: "u"}
	tests := []struct {
		name    string
		in, out []model.Message
	}{
		{"paired stays", []model.Message{u, call("a", "b"), res("a", "1"), res("b", "2")},
			[]model.Message{u, call("a", "b"), res("a", "1"), res("b", "2")}},
		{"results reordered to call order", []model.Message{call("a", "b"), res("b", "2"), res("a", "1")},
			[]model.Message{call("a", "b"), res("a", "1"), res("b", "2")}},
		{"user between call and result", []model.Message{call("a"), u, res("a", "1")},
			[]model.Message{call("a"), res("a", "1"), u}},
		{"missing result synthesized", []model.Message{call("a"), u},
			[]model.Message{call("a"), res("a", model.MissingToolResult), u}},
		{"orphan dropped", []model.Message{res("z", "1"), u}, []model.Message{u}},
		{"duplicate result dropped", []model.Message{call("a"), res("a", "1"), res("a", "again")},
			[]model.Message{call("a"), res("a", "1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]model.Message(nil), tt.in...)
			got := model.PairToolResults(tt.in)
			if !reflect.DeepEqual(got, tt.out) {
				t.Fatalf("got %+v\nwant %+v", got, tt.out)
			}
			if !reflect.DeepEqual(in, tt.in) {
				t.Fatal("input modified")
			}
		})
	}
}

// TestRetryable: which failures a fallback model may answer (DECISIONS
// 220): rate limits, server errors and overload, timeouts, broken
// connections; never rejected requests or credentials, cancellations or
// anything unclassified.
func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{model.NewError("openai", 429, errors.New("slow down")), true},
		{model.NewError("openai", 500, errors.New("oops")), true},
		{model.NewError("openai", 503, errors.New("unavailable")), true},
		{model.NewError("anthropic", 529, errors.New("overloaded")), true},
		{model.NewError("openai", 504, errors.New("gateway timeout")), true},
		{&model.Error{Kind: model.KindTimeout}, true},
		{model.NewError("openai", 0, &net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{fmt.Errorf("turn: %w", syscall.ECONNRESET), true},
		{context.DeadlineExceeded, true},
		{model.NewError("openai", 400, errors.New("context_length_exceeded")), false},
		{model.NewError("openai", 401, errors.New("bad key")), false},
		{model.NewError("openai", 403, errors.New("forbidden")), false},
		{model.NewError("openai", 404, errors.New("no such model")), false},
		{model.NewError("anthropic", 413, errors.New("too large")), false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := model.Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
