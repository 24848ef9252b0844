package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/anthropic"
	"github.com/agentbot/agentbot/model/fallback"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/model/openai"
)

const key = "sk-test-0123456789abcdef"

// observer records what the set reports, in order.
type observer struct {
	mu     sync.Mutex
	events []string
}

func (o *observer) add(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}
func (o *observer) ModelCall(m, outcome string)   { o.add("call " + m + " " + outcome) }
func (o *observer) ModelFallback(from, to string) { o.add("fallback " + from + "->" + to) }
func (o *observer) ModelBreaker(m, s string)      { o.add("breaker " + m + " " + s) }
func (o *observer) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.events
	o.events = nil
	return out
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func newSet(t *testing.T, clk clock.Clock, obs fallback.Observer, models map[string]fallback.Model) *fallback.Set {
	t.Helper()
	s, err := fallback.New(fallback.Options{Models: models, Breaker: fallback.DefaultBreaker},
		fallback.Deps{Clock: clk, Log: zerolog.Nop(), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func chain(t *testing.T, s *fallback.Set, name string) model.Provider {
	t.Helper()
	p, ok := s.Provider(name)
	if !ok {
		t.Fatalf("no model %s", name)
	}
	return p
}

var req = model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}

// TestDecision: which failures the next model answers, and which are
// returned as they are.
func TestDecision(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantModel string // "" when the error comes back
	}{
		{"429", model.NewError("openai", 429, errors.New("slow down")), "backup"},
		{"500", model.NewError("openai", 500, errors.New("oops")), "backup"},
		{"529 overloaded", model.NewError("anthropic", 529, errors.New("overloaded")), "backup"},
		{"timeout", &model.Error{Kind: model.KindTimeout, Provider: "openai"}, "backup"},
		{"refused", model.NewError("openai", 0, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "backup"},
		{"reset", model.NewError("openai", 0, fmt.Errorf("read: %w", syscall.ECONNRESET)), "backup"},
		{"unclassified", model.NewError("openai", 0, errors.New("odd")), ""},
		{"400 context too long", model.NewError("openai", 400, errors.New("context_length_exceeded")), ""},
		{"401", model.NewError("openai", 401, errors.New("bad key")), ""},
		{"403", model.NewError("openai", 403, errors.New("forbidden")), ""},
		{"cancelled", model.NewError("openai", 0, context.Canceled), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			main, backup := &modeltest.Scripted{}, &modeltest.Scripted{}
			main.Push(modeltest.Step{Err: tt.err})
			backup.Push(modeltest.Step{Resp: model.Response{Text: "from backup"}})
			s := newSet(t, clock.NewFake(t0), nil, map[string]fallback.Model{
				"main": {Provider: main, Fallbacks: []string{"backup"}}, "backup": {Provider: backup}})
			resp, err := chain(t, s, "main").Complete(context.Background(), req)
			if tt.wantModel == "" {
				if !errors.Is(err, tt.err) || len(backup.Requests()) != 0 {
					t.Fatalf("err %v (want %v), backup called %d times", err, tt.err, len(backup.Requests()))
				}
				return
			}
			if err != nil || resp.Model != tt.wantModel || resp.Text != "from backup" {
				t.Fatalf("resp %+v err %v, want an answer of %s", resp, err, tt.wantModel)
			}
		})
	}
}

func TestNewRejectsUnknownFallback(t *testing.T) {
	for _, fb := range []string{"nope", "main"} {
		_, err := fallback.New(fallback.Options{Models: map[string]fallback.Model{
			"main": {Provider: &modeltest.Scripted{}, Fallbacks: []string{fb}}}},
			fallback.Deps{Clock: clock.NewFake(t0)})
		if err == nil || !strings.Contains(err.Error(), "models.main.fallbacks") {
			t.Fatalf("fallback %q: err %v, want one naming models.main.fallbacks", fb, err)
		}
	}
}

// TestBreaker: three retryable failures within a minute open main's
// breaker; while open main is not called at all; after the cool-down one
// call probes it; a failed probe opens it again, a good one closes it.
func TestBreaker(t *testing.T) {
	clk := clock.NewFake(t0)
	obs := &observer{}
	main, backup := &modeltest.Scripted{}, &modeltest.Scripted{}
	backup.Fallback = func(model.Request) (model.Response, error) { return model.Response{Text: "b"}, nil }
	down := modeltest.Step{Err: model.NewError("openai", 503, errors.New("down"))}
	s := newSet(t, clk, obs, map[string]fallback.Model{
		"main": {Provider: main, Fallbacks: []string{"backup"}}, "backup": {Provider: backup}})
	if got := obs.take(); len(got) != 2 || !slices.Contains(got, "breaker main closed") {
		t.Fatalf("initial states %v", got)
	}
	p := chain(t, s, "main")
	call := func() string {
		t.Helper()
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
		return resp.Model
	}
	main.Push(down, down, down)
	for i := 0; i < 3; i++ {
		if got := call(); got != "backup" {
			t.Fatalf("call %d answered by %s", i, got)
		}
		clk.Advance(10 * time.Second)
	}
	if got, want := s.Degraded(), []string{"main (open)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Degraded = %v, want %v", got, want)
	}
	obs.take()
	// Open: main is skipped without a call.
	for i := 0; i < 5; i++ {
		call()
	}
	if n := len(main.Requests()); n != 3 {
		t.Fatalf("main called %d times while open, want 3 in all", n)
	}
	if got := obs.take(); got[0] != "fallback main->backup" || got[1] != "call backup ok" {
		t.Fatalf("events while open %v", got)
	}
	// Cool-down over: one probe, which fails: open again.
	clk.Advance(fallback.DefaultBreaker.Cooldown)
	main.Push(down)
	call()
	if n := len(main.Requests()); n != 4 {
		t.Fatalf("main called %d times, want the probe (4)", n)
	}
	want := []string{"breaker main half-open", "call main server", "breaker main open", "fallback main->backup", "call backup ok"}
	if got := obs.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("probe events %v, want %v", got, want)
	}
	call()
	if n := len(main.Requests()); n != 4 {
		t.Fatalf("main called again right after a failed probe (%d)", n)
	}
	// Next cool-down: the probe succeeds and closes the breaker.
	clk.Advance(fallback.DefaultBreaker.Cooldown)
	main.Push(modeltest.Step{Resp: model.Response{Text: "m"}})
	if got := call(); got != "main" {
		t.Fatalf("probe answered by %s", got)
	}
	if d := s.Degraded(); len(d) != 0 {
		t.Fatalf("Degraded after a good probe: %v", d)
	}
}

// TestBreakerWindow: failures further apart than the window never open it.
func TestBreakerWindow(t *testing.T) {
	clk := clock.NewFake(t0)
	main := &modeltest.Scripted{}
	main.Fallback = func(model.Request) (model.Response, error) {
		return model.Response{}, model.NewError("openai", 429, errors.New("slow"))
	}
	s := newSet(t, clk, nil, map[string]fallback.Model{"main": {Provider: main}})
	for i := 0; i < 6; i++ {
		if _, err := chain(t, s, "main").Complete(context.Background(), req); !errors.Is(err, model.ErrRateLimited) {
			t.Fatalf("call %d: err %v", i, err)
		}
		clk.Advance(31 * time.Second)
	}
	if d := s.Degraded(); len(d) != 0 {
		t.Fatalf("Degraded %v", d)
	}
}

// TestEveryModelOpen: with the whole chain open, the call fails at once
// with a server-kind error naming the skipped models.
func TestEveryModelOpen(t *testing.T) {
	clk := clock.NewFake(t0)
	main := &modeltest.Scripted{}
	main.Fallback = func(model.Request) (model.Response, error) {
		return model.Response{}, model.NewError("openai", 500, errors.New("down"))
	}
	s := newSet(t, clk, nil, map[string]fallback.Model{"main": {Provider: main}})
	p := chain(t, s, "main")
	for i := 0; i < 3; i++ {
		_, _ = p.Complete(context.Background(), req)
	}
	_, err := p.Complete(context.Background(), req)
	if !errors.Is(err, model.ErrServer) || !strings.Contains(err.Error(), "main skipped") || len(main.Requests()) != 3 {
		t.Fatalf("err %v after %d calls", err, len(main.Requests()))
	}
}

// newOpenAI and newAnthropic build real SDK providers against loopback
// fakes, with the SDK's own retries off (as the wiring sets them for a
// model with fallbacks).
func newOpenAI(t *testing.T, f *modeltest.OpenAIFake, timeout time.Duration) model.Provider {
	p, err := openai.New(model.Config{Provider: "openai", BaseURL: f.URL, APIKey: key, Model: "gpt-test", Timeout: timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newAnthropic(t *testing.T, f *modeltest.AnthropicFake) model.Provider {
	p, err := anthropic.New(model.Config{Provider: "anthropic", BaseURL: f.URL, APIKey: key, Model: "claude-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProvidersEndToEnd: an OpenAI-compatible model falling back to an
// Anthropic one, both real SDKs against loopback fakes.
func TestProvidersEndToEnd(t *testing.T) {
	tests := []struct {
		name      string
		primary   modeltest.Reply
		stream    bool
		wantModel string
		wantErr   error
		wantText  []string // pieces shown while streaming
	}{
		{name: "429", primary: modeltest.Reply{Status: 429, Message: "slow down"}, wantModel: "backup"},
		{name: "503", primary: modeltest.Reply{Status: 503, Message: "unavailable"}, wantModel: "backup"},
		{name: "timeout", primary: modeltest.Reply{Delay: time.Hour}, wantModel: "backup"},
		{name: "401 not hidden", primary: modeltest.Reply{Status: 401, Message: "bad key"}, wantErr: model.ErrAuth},
		{name: "400 not hidden", primary: modeltest.Reply{Status: 400, Message: "context_length_exceeded"}, wantErr: model.ErrBadRequest},
		{name: "streamed 429", primary: modeltest.Reply{Status: 429}, stream: true, wantModel: "backup", wantText: []string{"from backup"}},
		{name: "cut after first token", primary: modeltest.Reply{Chunks: []string{"Hel"}, Cut: true}, stream: true,
			wantErr: model.ErrServer, wantText: []string{"Hel"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			of, af := modeltest.NewOpenAIFake(t, key), modeltest.NewAnthropicFake(t, key)
			of.Respond(func(modeltest.Body) modeltest.Reply { return tt.primary })
			af.Respond(func(modeltest.Body) modeltest.Reply {
				return modeltest.Reply{Text: "from backup", Usage: model.Usage{Input: 50, Output: 5, Cached: 40}}
			})
			s := newSet(t, clock.NewFake(t0), nil, map[string]fallback.Model{
				"main":   {Provider: newOpenAI(t, of, 200*time.Millisecond), Fallbacks: []string{"backup"}},
				"backup": {Provider: newAnthropic(t, af)},
			})
			p := chain(t, s, "main")
			var resp model.Response
			var err error
			var shown []string
			if tt.stream {
				resp, err = p.(model.Streamer).Stream(context.Background(), req, func(d string) { shown = append(shown, d) })
			} else {
				resp, err = p.Complete(context.Background(), req)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(af.Requests()) != 0 {
					t.Fatalf("err %v (want %v); backup called %d times", err, tt.wantErr, len(af.Requests()))
				}
			} else if err != nil || resp.Model != tt.wantModel || resp.Text != "from backup" ||
				resp.Usage != (model.Usage{Input: 50, Output: 5, Cached: 40}) {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if !reflect.DeepEqual(shown, tt.wantText) {
				t.Fatalf("shown %q, want %q", shown, tt.wantText)
			}
			if n := len(of.Requests()); n != 1 {
				t.Fatalf("primary got %d requests, want 1 (no SDK retries under a fallback)", n)
			}
		})
	}
}

// BenchmarkDecision is what a chain adds to a model call that succeeds
// (breaker check and verdict, observer off): the cost on the reply path.
func BenchmarkDecision(b *testing.B) {
	ok := &modeltest.Scripted{Fallback: func(model.Request) (model.Response, error) { return model.Response{Text: "x"}, nil }}
	s, err := fallback.New(fallback.Options{Models: map[string]fallback.Model{"main": {Provider: ok}}, Breaker: fallback.DefaultBreaker},
		fallback.Deps{Clock: clock.Real{}, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := s.Provider("main")
	direct := &modeltest.Scripted{Fallback: ok.Fallback}
	b.Run("chain", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = p.Complete(context.Background(), req)
		}
	})
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = direct.Complete(context.Background(), req)
		}
	})
}

// TestRetryAfterOpensTheBreaker: a 429 whose Retry-After (seconds or an
// HTTP-date) says when to come back skips that model until then, not
// only after three failures; the wait is bounded by MaxRetryAfter. Both
// SDKs against their loopback fakes.
func TestRetryAfterOpensTheBreaker(t *testing.T) {
	tests := []struct {
		name       string
		anthropic  bool // the failing model is Anthropic's (else OpenAI's)
		retryAfter string
		skipFor    time.Duration // how long the model is skipped
	}{
		{"openai seconds", false, "120", 2 * time.Minute},
		{"openai HTTP-date", false, t0.Add(5 * time.Minute).Format(http.TimeFormat), 5 * time.Minute},
		{"anthropic seconds", true, "90", 90 * time.Second},
		{"anthropic HTTP-date", true, t0.Add(3 * time.Minute).Format(http.TimeFormat), 3 * time.Minute},
		{"bounded", false, "86400", fallback.DefaultBreaker.MaxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			of, af := modeltest.NewOpenAIFake(t, key), modeltest.NewAnthropicFake(t, key)
			limited := modeltest.Reply{Status: 429, Message: "slow down", RetryAfter: tt.retryAfter}
			ok := modeltest.Reply{Text: "fine"}
			var failing interface{ Requests() []modeltest.Body }
			if tt.anthropic {
				af.Respond(func(modeltest.Body) modeltest.Reply { return limited })
				of.Respond(func(modeltest.Body) modeltest.Reply { return ok })
				failing = af
			} else {
				of.Respond(func(modeltest.Body) modeltest.Reply { return limited })
				af.Respond(func(modeltest.Body) modeltest.Reply { return ok })
				failing = of
			}
			main, backup := newOpenAI(t, of, 5*time.Second), newAnthropic(t, af)
			if tt.anthropic {
				main, backup = backup, main
			}
			s := newSet(t, clk, nil, map[string]fallback.Model{
				"main": {Provider: main, Fallbacks: []string{"backup"}}, "backup": {Provider: backup}})
			p := chain(t, s, "main")
			call := func() string {
				t.Helper()
				resp, err := p.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				return resp.Model
			}
			if got := call(); got != "backup" {
				t.Fatalf("first call answered by %s", got)
			}
			if d := s.Degraded(); !slices.Equal(d, []string{"main (open)"}) {
				t.Fatalf("after one 429 with Retry-After: Degraded %v", d)
			}
			clk.Advance(tt.skipFor - time.Second)
			if got := call(); got != "backup" || len(failing.Requests()) != 1 {
				t.Fatalf("before Retry-After ended: answered by %s, main called %d times", got, len(failing.Requests()))
			}
			clk.Advance(time.Second)
			_ = call() // the probe
			if n := len(failing.Requests()); n != 2 {
				t.Fatalf("main called %d times once Retry-After ended, want the probe (2)", n)
			}
		})
	}
}

// TestParseRetryAfter: the header forms providers send.
func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		h    map[string]string
		want time.Time
	}{
		{"seconds", map[string]string{"Retry-After": "30"}, t0.Add(30 * time.Second)},
		{"fraction", map[string]string{"Retry-After": "1.5"}, t0.Add(1500 * time.Millisecond)},
		{"HTTP-date", map[string]string{"Retry-After": "Wed, 02 Dec 2026 12:10:00 GMT"}, t0.Add(10 * time.Minute)},
		{"milliseconds first", map[string]string{"Retry-After": "30", "Retry-After-Ms": "250"}, t0.Add(250 * time.Millisecond)},
		{"none", nil, time.Time{}},
		{"garbage", map[string]string{"Retry-After": "soon"}, time.Time{}},
		{"negative", map[string]string{"Retry-After": "-5"}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.h {
				h.Set(k, v)
			}
			if got := model.ParseRetryAfter(h).Until(t0); !got.Equal(tt.want) {
				t.Fatalf("until %v, want %v", got, tt.want)
			}
		})
	}
}
