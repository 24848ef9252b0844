package mcp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/model"
)

// fakeServer is an in-memory MCP server (the SDK's own server over its
// in-memory transport); every connect gets a fresh session of the same
// server, and the test can end the current one (a crash).
type fakeServer struct {
	t      *testing.T
	srv    *sdk.Server
	mu     sync.Mutex
	cur    *sdk.ServerSession
	fail   error // Transport fails with it while set
	starts int
	block  chan struct{} // the "slow" tool waits on it
}

type echoIn struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{t: t, srv: sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil), block: make(chan struct{})}
	sdk.AddTool(f.srv, &sdk.Tool{Name: "echo", Description: "Echo a message."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	sdk.AddTool(f.srv, &sdk.Tool{Name: "fail", Description: "Always fails."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such file"}}}, nil, nil
	})
	sdk.AddTool(f.srv, &sdk.Tool{Name: "big", Description: "A long answer and a picture."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", 1000)}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("png")}}}, nil, nil
	})
	sdk.AddTool(f.srv, &sdk.Tool{Name: "slow", Description: "Waits."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
	})
	sdk.AddTool(f.srv, &sdk.Tool{Name: "odd.name/v2", Description: "A name outside the providers' rule."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "odd"}}}, nil, nil
	})
	return f
}

func (f *fakeServer) transport() (sdk.Transport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.fail != nil {
		return nil, f.fail
	}
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.Connect(context.Background(), st, nil)
	if err != nil {
		return nil, err
	}
	f.cur = ss
	return ct, nil
}

// crash ends the current session from the server's side.
func (f *fakeServer) crash() {
	f.mu.Lock()
	ss := f.cur
	f.mu.Unlock()
	if ss != nil {
		_ = ss.Close()
	}
}

// manualAfter releases restart delays one at a time, when the test says.
type manualAfter struct {
	mu      sync.Mutex
	waiting []chan time.Time
	delays  []time.Duration
}

func (a *manualAfter) after(d time.Duration) <-chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan time.Time, 1)
	a.waiting = append(a.waiting, ch)
	a.delays = append(a.delays, d)
	return ch
}

func (a *manualAfter) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

func (a *manualAfter) fire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ch := range a.waiting {
		ch <- time.Time{}
	}
	a.waiting = nil
}

// fakeAuth admits the users in allowed.
type fakeAuth struct{ allowed map[string]bool }

func (f fakeAuth) Permits(_ context.Context, actor authz.Actor, _ authz.Grant, what string) error {
	if f.allowed[actor.UserID] {
		return nil
	}
	return &authz.Refusal{Msg: "you may not use " + what}
}

// waitFor waits for a condition the hub reaches on its own goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

type hubFixture struct {
	hub   *Hub
	srv   *fakeServer
	after *manualAfter
	stop  func()
}

func newHub(t *testing.T, mod func(*Server), d Deps) *hubFixture {
	t.Helper()
	f := newFakeServer(t)
	s := Server{Name: "fake", Transport: f.transport, Timeout: 5 * time.Second}
	if mod != nil {
		mod(&s)
	}
	a := &manualAfter{}
	d.After = a.after
	d.Log = zerolog.Nop()
	h := New(Options{Servers: []Server{s}, Agents: map[string][]string{"main": {"fake"}}, FailingAfter: 2}, d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after stop")
		}
	}
	t.Cleanup(stop)
	if err := h.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	return &hubFixture{hub: h, srv: f, after: a, stop: stop}
}

var alice = authz.Actor{UserID: "alice"}

func names(ts []model.Tool) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestToolsNamespacedWithSchemas(t *testing.T) {
	t.Parallel()
	f := newHub(t, nil, Deps{})
	ts := f.hub.Tools(context.Background(), "main", alice)
	got := strings.Join(names(ts), ",")
	for _, want := range []string{"fake__echo", "fake__fail", "fake__big", "fake__slow"} {
		if !strings.Contains(got, want) {
			t.Errorf("tools %s lack %s", got, want)
		}
	}
	for _, tl := range ts {
		if !ValidName(tl.Name) {
			t.Errorf("tool name %q breaks the providers' rule", tl.Name)
		}
		if tl.Name == "fake__echo" {
			props, _ := tl.Parameters["properties"].(map[string]any)
			msg, _ := props["message"].(map[string]any)
			if tl.Parameters["type"] != "object" || msg["type"] != "string" || msg["description"] != "the text to echo" {
				t.Errorf("echo schema not passed through: %v", tl.Parameters)
			}
		}
	}
	if !strings.Contains(got, "fake__odd_name_v2_") {
		t.Errorf("odd tool name not made valid: %s", got)
	}
	if ts := f.hub.Tools(context.Background(), "other", alice); len(ts) != 0 {
		t.Errorf("an agent without mcp servers got %v", names(ts))
	}
}

func TestQualify(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 80)
	tests := []struct{ server, tool string }{
		{"files", "read_file"}, {"files", "a.b"}, {"files", "a_b"}, {"files", long}, {"files", long + "y"}, {"f", "ünïcode"}, {"f", ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		n := qualify(tt.server, tt.tool)
		if !ValidName(n) || !strings.HasPrefix(n, tt.server+Separator) {
			t.Errorf("qualify(%q, %q) = %q", tt.server, tt.tool, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%q and %q share the name %q", prev, tt.tool, n)
		}
		seen[n] = tt.tool
	}
	if got := qualify("files", "read_file"); got != "files__read_file" {
		t.Errorf("a valid name changed: %q", got)
	}
}

func TestAllowedToolsAndGrant(t *testing.T) {
	t.Parallel()
	f := newHub(t, func(s *Server) {
		s.AllowedTools = []string{"echo"}
		s.Grant = authz.Grant{Users: []string{"alice"}}
	}, Deps{Auth: fakeAuth{allowed: map[string]bool{"alice": true}}})
	ctx := context.Background()
	if got := names(f.hub.Tools(ctx, "main", alice)); strings.Join(got, ",") != "fake__echo" {
		t.Errorf("alice's tools = %v, want only fake__echo", got)
	}
	bob := authz.Actor{UserID: "bob"}
	if got := f.hub.Tools(ctx, "main", bob); len(got) != 0 {
		t.Errorf("bob may not use the server but was offered %v", names(got))
	}
	if _, err := f.hub.Call(ctx, "main", bob, model.ToolCall{Name: "fake__echo", Arguments: `{"message":"x"}`}); !authz.IsRefusal(err) {
		t.Errorf("bob's call = %v, want a refusal", err)
	}
	if _, err := f.hub.Call(ctx, "main", alice, model.ToolCall{Name: "fake__fail"}); err == nil {
		t.Error("a tool outside allowedTools ran")
	}
}

func TestCallResults(t *testing.T) {
	t.Parallel()
	f := newHub(t, func(s *Server) { s.MaxResultBytes = 300 }, Deps{})
	ctx := context.Background()
	tests := []struct {
		name, tool, args string
		want             []string
		wantErr          bool
	}{
		{"text", "fake__echo", `{"message":"hi"}`, []string{"Echo: hi"}, false},
		{"a tool's own error is a result", "fake__fail", ``, []string{"error: no such file"}, false},
		{"capped on a rune boundary", "fake__big", `{}`, []string{"[truncated: "}, false},
		{"bad arguments", "fake__echo", `[1]`, nil, true},
		{"unknown tool", "fake__nope", `{}`, nil, true},
		{"another server's tool", "other__echo", `{}`, nil, true},
	}
	for _, tt := range tests {
		out, err := f.hub.Call(ctx, "main", alice, model.ToolCall{ID: "c1", Name: tt.tool, Arguments: tt.args})
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: result %q lacks %q", tt.name, out, w)
			}
		}
		if len(out) > 300 || !utf8.ValidString(out) {
			t.Errorf("%s: result is %d bytes (cap 300), valid UTF-8 %v", tt.name, len(out), utf8.ValidString(out))
		}
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	f := newHub(t, func(s *Server) { s.Timeout = 200 * time.Millisecond }, Deps{})
	_, err := f.hub.Call(context.Background(), "main", alice, model.ToolCall{Name: "fake__slow"})
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("slow call = %v, want a timeout", err)
	}
}

// A crash withdraws the server's tools, the call in flight fails, and after
// the backoff the server is restarted and its tools return.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	f := newHub(t, nil, Deps{})
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := f.hub.Call(ctx, "main", alice, model.ToolCall{Name: "fake__slow"})
		errc <- err
	}()
	waitFor(t, "the call in flight", func() bool { return f.hub.Status()[0].InFlight == 1 })
	f.srv.crash()
	if err := <-errc; err == nil {
		t.Error("the call in flight succeeded across a crash")
	}
	waitFor(t, "the restart delay", func() bool { return f.after.pending() == 1 })
	if got := f.hub.Tools(ctx, "main", alice); len(got) != 0 {
		t.Errorf("tools of a crashed server still offered: %v", names(got))
	}
	if st := f.hub.Status()[0]; st.State != StateDown || st.Restarts != 1 {
		t.Errorf("status after crash = %+v", st)
	}
	f.after.fire()
	waitFor(t, "the server back up", func() bool { return len(f.hub.Tools(ctx, "main", alice)) > 0 })
	out, err := f.hub.Call(ctx, "main", alice, model.ToolCall{Name: "fake__echo", Arguments: `{"message":"back"}`})
	if err != nil || out != "Echo: back" {
		t.Errorf("call after restart = %q, %v", out, err)
	}
}

// A server that keeps failing to start is reported failing, with backoff
// growing, and recovers when it starts again.
func TestKeepsFailing(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	f.fail = errors.New("exec: npx: not found")
	a := &manualAfter{}
	h := New(Options{Servers: []Server{{Name: "fake", Transport: f.transport}}, Agents: map[string][]string{"main": {"fake"}}, FailingAfter: 2, Backoff: time.Second, MaxBackoff: 3 * time.Second},
		Deps{After: a.after, Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Run(ctx) }()
	waitFor(t, "first failure", func() bool { return a.pending() == 1 })
	if got := h.Failing(); len(got) != 0 {
		t.Errorf("failing after one failure: %v", got)
	}
	for range 3 {
		a.fire()
		waitFor(t, "next failure", func() bool { return a.pending() == 1 })
	}
	got := h.Failing()
	if len(got) != 1 || !strings.Contains(got[0], "fake: failing after 4 attempts: exec: npx: not found") {
		t.Errorf("Failing() = %v", got)
	}
	a.mu.Lock()
	delays := append([]time.Duration(nil), a.delays...)
	a.mu.Unlock()
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}; len(delays) != 4 || delays[1] != want[1] || delays[3] != want[3] {
		t.Errorf("backoff delays = %v, want %v", delays, want)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	a.fire()
	waitFor(t, "recovery", func() bool { return len(h.Tools(ctx, "main", alice)) > 0 })
	if got := h.Failing(); len(got) != 0 {
		t.Errorf("still failing after recovery: %v", got)
	}
}

// notifications/tools/list_changed refreshes the offered tools.
func TestToolListChanged(t *testing.T) {
	t.Parallel()
	f := newHub(t, nil, Deps{})
	ctx := context.Background()
	sdk.AddTool(f.srv.srv, &sdk.Tool{Name: "added", Description: "New."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "new"}}}, nil, nil
	})
	waitFor(t, "the new tool", func() bool {
		return strings.Contains(strings.Join(names(f.hub.Tools(ctx, "main", alice)), ","), "fake__added")
	})
	f.srv.srv.RemoveTools("echo")
	waitFor(t, "the removed tool gone", func() bool {
		return !strings.Contains(strings.Join(names(f.hub.Tools(ctx, "main", alice)), ","), "fake__echo")
	})
}

// Configured secrets never reach an error text the model or a log sees.
func TestErrorsRedacted(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	const secret = "sk-test-secret-value-123"
	f.fail = errors.New("connect https://u:" + secret + "@mcp.example/ failed; key " + secret)
	a := &manualAfter{}
	var logs strings.Builder
	var lmu sync.Mutex
	h := New(Options{Servers: []Server{{Name: "fake", Transport: f.transport}}, Agents: map[string][]string{"main": {"fake"}}},
		Deps{After: a.after, Log: zerolog.New(lockedWriter{&lmu, &logs}), Redact: redact.New(secret)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Run(ctx) }()
	waitFor(t, "failure", func() bool { return a.pending() == 1 })
	st := h.Status()[0]
	lmu.Lock()
	logText := logs.String()
	lmu.Unlock()
	if strings.Contains(st.LastError, secret) || strings.Contains(logText, secret) {
		t.Errorf("secret leaked: status %q, logs %q", st.LastError, logText)
	}
	if !strings.Contains(logText, "mcp server down") {
		t.Errorf("no log line for the failure: %q", logText)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A turn right after the start waits for its agent's servers' first start
// attempt (bounded by the server's timeout): a server still starting gives
// the turn its tools once up; one whose start failed, or that did not
// answer within its timeout, gives none and is named in a warning.
func TestToolsWaitForFirstStart(t *testing.T) {
	cases := []struct {
		name      string
		fail      error
		timeout   bool // the server never answers: the timeout ends the wait
		wantTools bool
		wantLog   string
	}{
		{name: "slow start", wantTools: true},
		{name: "failed start", fail: errors.New("exec: npx: not found"), wantLog: "exec: npx: not found"},
		{name: "no answer", timeout: true, wantLog: "no answer within its timeout yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.fail = c.fail
			gate := make(chan struct{})
			var gateOnce sync.Once
			open := func() { gateOnce.Do(func() { close(gate) }) }
			slow := func() (sdk.Transport, error) { <-gate; return f.transport() }
			a := &manualAfter{}
			var lmu sync.Mutex
			var logs strings.Builder
			h := New(Options{Servers: []Server{{Name: "fake", Transport: slow, Timeout: 7 * time.Second}}, Agents: map[string][]string{"main": {"fake"}}},
				Deps{After: a.after, Log: zerolog.New(lockedWriter{&lmu, &logs})})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = h.Run(ctx); close(done) }()
			t.Cleanup(func() { open(); cancel(); <-done })

			got := make(chan []model.Tool, 1)
			go func() { got <- h.Tools(context.Background(), "main", alice) }()
			// The turn is waiting (its bounded wait's timer is set), not
			// served with whatever exists now.
			waitFor(t, "the turn to wait for the server", func() bool {
				select {
				case ts := <-got:
					t.Fatalf("the turn got %v before the server's first start ended", names(ts))
				default:
				}
				return a.pending() > 0
			})
			if c.timeout {
				a.mu.Lock()
				d := a.delays[0]
				a.mu.Unlock()
				if d != 7*time.Second {
					t.Errorf("the wait is bounded by %s, want the server's timeout", d)
				}
				a.fire()
			} else {
				open()
			}
			var ts []model.Tool
			select {
			case ts = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("Tools did not return")
			}
			if (len(ts) > 0) != c.wantTools {
				t.Fatalf("tools %v, want some=%v", names(ts), c.wantTools)
			}
			downCh := make(chan []string, 1)
			go func() { downCh <- h.Unavailable(context.Background(), "main") }()
			if c.timeout { // still no answer: this wait is bounded by the timeout too
				waitFor(t, "Unavailable to wait for the server", func() bool { return a.pending() > 0 })
				a.fire()
			}
			var down []string
			select {
			case down = <-downCh:
			case <-time.After(10 * time.Second):
				t.Fatal("Unavailable did not return")
			}
			if c.wantTools != (len(down) == 0) {
				t.Errorf("Unavailable = %q with tools=%v", down, c.wantTools)
			}
			if c.wantLog != "" && (len(down) != 1 || !strings.HasPrefix(down[0], "fake: ") || !strings.Contains(down[0], c.wantLog)) {
				t.Errorf("Unavailable = %q, want the server named with %q (a job run's diagnostics)", down, c.wantLog)
			}
			if c.wantLog != "" {
				lmu.Lock()
				l := logs.String()
				lmu.Unlock()
				if !strings.Contains(l, `"mcp":"fake"`) || !strings.Contains(l, c.wantLog) || !strings.Contains(l, "without its tools") {
					t.Errorf("log does not name the server and why: %s", l)
				}
			}
		})
	}
}
