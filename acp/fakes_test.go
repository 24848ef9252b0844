package acp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// hub lets the fakes announce changes; tests wait on conditions.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *hub) changed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
}

func (h *hub) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		if h.ch == nil {
			h.ch = make(chan struct{})
		}
		ch := h.ch
		h.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type shownMsg struct {
	id, delivery string
	text         string
	buttons      []delivery.Button
	texts        []string // every text it displayed
}

// fakeLive is the chat under a real delivery.Outbound: it posts and edits
// live messages (an idempotent post per delivery part, as Discord's nonce).
type fakeLive struct {
	h    *hub
	mu   sync.Mutex
	n    int
	msgs []*shownMsg
	keys map[string]string // delivery/part -> message id
}

var (
	_ delivery.Sender     = (*fakeLive)(nil)
	_ delivery.LiveSender = (*fakeLive)(nil)
)

// Send displays a whole message (a notice another part of the bot posts
// in the thread through the same Outbound).
func (f *fakeLive) Send(_ context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	f.mu.Lock()
	f.n++
	m := &shownMsg{id: fmt.Sprintf("m%03d", f.n), delivery: d.ID, text: d.Text, texts: []string{d.Text}}
	f.msgs = append(f.msgs, m)
	f.mu.Unlock()
	f.h.changed()
	return delivery.Receipt{MessageIDs: []string{m.id}}, nil
}

// attempts is the Outbound's redactor: it changes nothing and records
// every text Outbound is about to send (a Deliver records its text before
// it waits for the conversation's send lock).
type attempts struct {
	h  *hub
	mu sync.Mutex
	ts []string
}

func (a *attempts) String(s string) string {
	a.mu.Lock()
	a.ts = append(a.ts, s)
	a.mu.Unlock()
	a.h.changed()
	return s
}

func (a *attempts) Unfinished(string) int { return 0 }

func (a *attempts) seen(sub string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.ContainsFunc(a.ts, func(s string) bool { return strings.Contains(s, sub) })
}

func (f *fakeLive) SplitLive(text string) []string {
	var out []string
	for r := []rune(text); len(r) > 0; {
		n := min(2000, len(r))
		out, r = append(out, string(r[:n])), r[n:]
	}
	return out
}

func (f *fakeLive) PostLive(_ context.Context, d delivery.Delivery, part int, text string, c delivery.Controls) (string, error) {
	f.mu.Lock()
	key := fmt.Sprintf("%s/%d", d.ID, part)
	if id, ok := f.keys[key]; ok {
		f.mu.Unlock()
		return id, nil
	}
	f.n++
	m := &shownMsg{id: fmt.Sprintf("m%03d", f.n), delivery: d.ID, text: text, buttons: c.Buttons, texts: []string{text}}
	if f.keys == nil {
		f.keys = map[string]string{}
	}
	f.keys[key] = m.id
	f.msgs = append(f.msgs, m)
	f.mu.Unlock()
	f.h.changed()
	return m.id, nil
}

func (f *fakeLive) EditLive(_ context.Context, _ delivery.Delivery, id, text string, c delivery.Controls) error {
	f.mu.Lock()
	for _, m := range f.msgs {
		if m.id == id {
			m.text, m.buttons = text, c.Buttons
			m.texts = append(m.texts, text)
		}
	}
	f.mu.Unlock()
	f.h.changed()
	return nil
}

func (f *fakeLive) snapshot() []shownMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]shownMsg, len(f.msgs))
	for i, m := range f.msgs {
		out[i] = *m
		out[i].texts = append([]string(nil), m.texts...)
	}
	return out
}

func (f *fakeLive) find(sub string) (shownMsg, bool) {
	for _, m := range f.snapshot() {
		if strings.Contains(m.text, sub) {
			return m, true
		}
	}
	return shownMsg{}, false
}

type notice struct{ text, source string }

type fakeNotices struct {
	h  *hub
	mu sync.Mutex
	ns []notice
}

func (f *fakeNotices) Notify(_ context.Context, _ binding.ConversationRef, _, text string, source transcript.Source, _ string) error {
	f.mu.Lock()
	f.ns = append(f.ns, notice{text, string(source)})
	f.mu.Unlock()
	f.h.changed()
	return nil
}

func (f *fakeNotices) all() []notice {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]notice(nil), f.ns...)
}

type notifyingAppender struct {
	h   *hub
	svc *transcript.Service
}

func (a notifyingAppender) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error) {
	out, err := a.svc.Append(ctx, key, e)
	a.h.changed()
	return out, err
}

type fakeBindings struct {
	mu   sync.Mutex
	recs map[string]binding.Record
}

func (f *fakeBindings) Bind(_ context.Context, in binding.BindInput) (binding.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := binding.Record{ID: "b-" + in.Conversation.ConversationID, TargetSessionKey: in.TargetSessionKey, TargetKind: in.TargetKind,
		Conversation: in.Conversation, AgentID: in.AgentID, BoundBy: in.BoundBy, Status: binding.StatusActive}
	f.recs[in.Conversation.Key()] = r
	return r, nil
}

func (f *fakeBindings) ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[ref.Key()]
	return r, ok
}

// touchless adds the Touch Outbound calls (nothing to record here).
type touchless struct{ *fakeBindings }

func (touchless) Touch(string, time.Time) {}

type fakeThreads struct{ n int }

func (f *fakeThreads) CreateThread(_ context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	f.n++
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: fmt.Sprintf("th%d", f.n), ParentConversationID: parent.ConversationID}, nil
}

// fakeAuthority: "op" is an operator; users listed in the agent's users may start.
type fakeAuthority struct{}

func (fakeAuthority) Operator(_ context.Context, a authz.Actor, _ binding.ConversationRef) bool {
	return a.UserID == "op"
}
func (fakeAuthority) MayUseAgent(_ context.Context, a authz.Actor, users, roles []string, what string) error {
	if a.UserID == "op" {
		return nil
	}
	for _, u := range users {
		if u == a.UserID {
			return nil
		}
	}
	return &authz.Refusal{Msg: "only operators can " + what}
}

// timers is the injected After: a zero duration fires at once, others
// when the test fires them.
type timers struct {
	h  *hub
	mu sync.Mutex
	w  map[time.Duration][]chan time.Time
	// clk, if set, is moved on by a fired timer's duration first: the
	// live messages' pacing reads it (the timer ends a wait, the clock
	// says the interval has passed).
	clk *tickClock
}

func (tm *timers) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if d == 0 {
		ch <- time.Time{}
		return ch
	}
	tm.mu.Lock()
	tm.w[d] = append(tm.w[d], ch)
	tm.mu.Unlock()
	tm.h.changed()
	return ch
}

func (tm *timers) advance(d time.Duration) {
	if tm.clk != nil && d > 0 {
		tm.clk.mu.Lock()
		tm.clk.t = tm.clk.t.Add(d)
		tm.clk.mu.Unlock()
	}
}

func (tm *timers) waiting(d time.Duration) int {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return len(tm.w[d])
}

// fireAll fires every waiting timer but the named ones.
func (tm *timers) fireAll(except ...time.Duration) int {
	tm.mu.Lock()
	var ws []chan time.Time
	var longest time.Duration
	for d, chs := range tm.w {
		if !slices.Contains(except, d) {
			ws = append(ws, chs...)
			delete(tm.w, d)
			longest = max(longest, d)
		}
	}
	tm.mu.Unlock()
	tm.advance(longest)
	for _, ch := range ws {
		ch <- time.Time{}
	}
	return len(ws)
}

func (tm *timers) fire(d time.Duration) {
	tm.mu.Lock()
	ws := tm.w[d]
	delete(tm.w, d)
	tm.mu.Unlock()
	tm.advance(d)
	for _, ch := range ws {
		ch <- time.Time{}
	}
}

// tickClock advances a second on every reading, so no edit is throttled.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

const (
	permTimeout = time.Hour
	cancelGrace = 2 * time.Hour
	idleTimeout = 3 * time.Hour
)

type fixture struct {
	t       *testing.T
	h       *hub
	live    *fakeLive
	notices *fakeNotices
	out     *delivery.Outbound // the turn's live messages; other sends in the thread
	sent    *attempts          // every text out was about to send
	tr      *transcript.Service
	store   *memory.Store
	binds   *fakeBindings
	timers  *timers
	m       *acp.Manager
	ac      acp.AgentConfig
	log     string
	cancel  context.CancelFunc
	done    chan struct{}
	logs    *logBuffer
	// editInterval is the manager's (0: its default, never reached with tickClock).
	editInterval time.Duration
	// procs records process groups (nil: none; set, then restart).
	procs acp.Tracker
}

type fixOpt func(*acp.AgentConfig)

func newFixture(t *testing.T, opts ...fixOpt) *fixture {
	t.Helper()
	dir := t.TempDir()
	h := &hub{}
	f := &fixture{t: t, h: h, live: &fakeLive{h: h}, notices: &fakeNotices{h: h}, store: memory.New(),
		binds: &fakeBindings{recs: map[string]binding.Record{}}, timers: &timers{h: h, w: map[time.Duration][]chan time.Time{}, clk: &tickClock{}},
		log: filepath.Join(dir, "agent.log")}
	f.logs = &logBuffer{h: h}
	f.tr = transcript.New(transcript.Options{}, transcript.Deps{Store: f.store, Clock: &tickClock{}})
	f.ac = acp.AgentConfig{Name: "script", Command: acptest.Build(t), Env: map[string]string{"SCRIPTAGENT_LOG": f.log, "GEMINI_API_KEY": "k-configured"},
		Workspace: filepath.Join(dir, "ws"), Users: []string{"alice"}}
	for _, o := range opts {
		o(&f.ac)
	}
	f.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("displayed: %q\nagent log:\n%s", texts(f.live.snapshot()), f.agentLog())
		}
	})
	return f
}

// start runs a manager (a new one after restart).
func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	f.sent = &attempts{h: f.h}
	f.out = delivery.NewOutbound(delivery.OutboundOptions{}, delivery.OutboundDeps{Sender: f.live, Outbox: f.store, Transcripts: notifyingAppender{f.h, f.tr},
		Bindings: touchless{f.binds}, Clock: f.timers.clk, Log: zerolog.New(f.logs), Redact: f.sent})
	f.m = acp.New(acp.Options{Agents: []acp.AgentConfig{f.ac}, PermissionTimeout: permTimeout, CancelGrace: cancelGrace, EditInterval: f.editInterval,
		Grace: 200 * time.Millisecond, KillAfter: 200 * time.Millisecond, Backoff: func(int) time.Duration { return 0 }, After: f.timers.After},
		acp.Deps{Live: f.out, Notices: f.notices, Transcripts: notifyingAppender{f.h, f.tr}, Bindings: f.binds, Threads: &fakeThreads{},
			Authority: fakeAuthority{}, Clock: &tickClock{}, Log: zerolog.New(f.logs), Procs: f.procs})
	go func() { _ = f.m.Run(ctx); close(f.done) }()
	f.t.Cleanup(f.stop)
}

func (f *fixture) stop() {
	f.cancel()
	<-f.done
}

func (f *fixture) restart() {
	f.stop()
	f.start()
}

var channel = binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "c1"}

// spawn binds a new thread as alice and waits for the agent to be up.
func (f *fixture) spawn() acp.StartResult {
	f.t.Helper()
	res, err := f.m.Start(context.Background(), acp.StartRequest{Agent: f.ac.Name, Where: channel, UserID: "alice"})
	if err != nil {
		f.t.Fatalf("start: %v", err)
	}
	return res
}

func (f *fixture) binding(res acp.StartResult) binding.Record {
	r, ok := f.binds.ResolveByConversation(res.Thread)
	if !ok {
		f.t.Fatal("thread not bound")
	}
	return r
}

var msgN int

// say posts a user message (a script) in the thread.
func (f *fixture) say(res acp.StartResult, user, script string) {
	f.t.Helper()
	msgN++
	err := f.m.HandleMessage(context.Background(), f.binding(res), acp.Message{Conversation: res.Thread, MessageID: fmt.Sprintf("u%03d", msgN),
		AuthorID: user, AuthorName: user, Text: script})
	if err != nil {
		f.t.Fatalf("handle message: %v", err)
	}
}

func (f *fixture) agentLog() string {
	b, _ := os.ReadFile(f.log)
	return string(b)
}

// checkLog asserts the agent logged sub. The agent logs before it
// answers, so whatever the bot saw of that answer implies the line.
func (f *fixture) checkLog(sub string) {
	f.t.Helper()
	if !strings.Contains(f.agentLog(), sub) {
		f.t.Fatalf("agent log has no %q:\n%s", sub, f.agentLog())
	}
}

func (f *fixture) waitShown(sub string) shownMsg {
	f.t.Helper()
	var m shownMsg
	f.h.wait(f.t, "a message showing "+sub, func() bool {
		var ok bool
		m, ok = f.live.find(sub)
		return ok
	})
	return m
}

// entries returns the session's assistant entries.
func (f *fixture) entries(key string) []transcript.Entry {
	es, err := f.tr.History(context.Background(), key, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

// waitTurnEnd waits until the transcript holds an assistant entry for
// every posted message (the turn writes them when it ends).
func (f *fixture) waitEntries(key string, n int) []transcript.Entry {
	f.t.Helper()
	var out []transcript.Entry
	f.h.wait(f.t, fmt.Sprintf("%d assistant entries", n), func() bool {
		out = out[:0]
		for _, e := range f.entries(key) {
			if e.Role == transcript.RoleAssistant {
				out = append(out, e)
			}
		}
		return len(out) >= n
	})
	return out
}

// checkRule1 compares every assistant entry with what its message displays.
func (f *fixture) checkRule1(key string) {
	f.t.Helper()
	shown := map[string]shownMsg{}
	for _, m := range f.live.snapshot() {
		shown[m.id] = m
	}
	var ids []string
	for _, e := range f.entries(key) {
		if e.Role != transcript.RoleAssistant {
			continue
		}
		if len(e.MessageIDs) != 1 {
			f.t.Fatalf("entry %d has ids %v", e.Seq, e.MessageIDs)
		}
		m, ok := shown[e.MessageIDs[0]]
		if !ok {
			f.t.Fatalf("entry %d names message %s, never shown", e.Seq, e.MessageIDs[0])
		}
		if m.text != e.Text {
			f.t.Errorf("entry %d text %q, display %q", e.Seq, e.Text, m.text)
		}
		ids = append(ids, m.id)
		delete(shown, m.id)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] < ids[i-1] {
			f.t.Errorf("entries out of display order: %v", ids)
		}
	}
	for id, m := range shown {
		f.t.Errorf("message %s %q is in no entry", id, m.text)
	}
}

// logBuffer is the manager's log; a line is an event tests can wait on.
type logBuffer struct {
	h  *hub
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.h.changed()
	return len(p), nil
}

func (l *logBuffer) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), sub)
}
