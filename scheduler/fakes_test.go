package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/memory"
)

var ctx = context.Background()

var chat = binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "100"}

const otherChannel = "channel:200"

// fakeChat records in-chat turns; fail/panic make them fail.
type fakeChat struct {
	mu    sync.Mutex
	calls []scheduler.InChatRun
	err   error
	panic bool
	block chan struct{} // when set, RunJobTurn waits for it (after signalling started)
	start chan struct{}
	n     int
}

func (f *fakeChat) RunJobTurn(_ context.Context, in scheduler.InChatRun) ([]string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in)
	f.n++
	n, err, p, block, start := f.n, f.err, f.panic, f.block, f.start
	f.mu.Unlock()
	if start != nil {
		start <- struct{}{}
	}
	if block != nil {
		<-block
	}
	if p {
		panic("runner exploded")
	}
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("trigger-%d", n), fmt.Sprintf("reply-%d", n)}, nil
}

func (f *fakeChat) runs() []scheduler.InChatRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]scheduler.InChatRun(nil), f.calls...)
}

type fakeBackground struct {
	mu     sync.Mutex
	calls  []scheduler.BackgroundRun
	result string
	err    error
}

func (f *fakeBackground) RunBackground(_ context.Context, in scheduler.BackgroundRun) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, in)
	return f.result, f.err
}

func (f *fakeBackground) runs() []scheduler.BackgroundRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]scheduler.BackgroundRun(nil), f.calls...)
}

// fakeDeliverer stands in for Outbound: it records deliveries, returns a
// receipt, and is idempotent on delivery ids like Outbound.
type fakeDeliverer struct {
	mu    sync.Mutex
	sent  []delivery.Delivery
	byID  map[string]delivery.Result
	fail  error
	calls int
	// skip is the SkipReason of every confirmed delivery (Rule 1 exceptions).
	skip string
	// done, when set, receives each delivery it confirmed.
	done chan delivery.Delivery
}

func (f *fakeDeliverer) Deliver(_ context.Context, d delivery.Delivery, _ delivery.CommitFunc) (delivery.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.byID == nil {
		f.byID = map[string]delivery.Result{}
	}
	if r, ok := f.byID[d.ID]; ok {
		return r, nil
	}
	if f.fail != nil {
		return delivery.Result{}, &delivery.FailedError{DeliveryID: d.ID, Target: d.Target, Err: f.fail}
	}
	f.sent = append(f.sent, d)
	r := delivery.Result{MessageIDs: []string{fmt.Sprintf("msg-%d", len(f.sent))}, SkipReason: f.skip}
	f.byID[d.ID] = r
	if f.done != nil {
		f.done <- d
	}
	return r, nil
}

func (f *fakeDeliverer) deliveries() []delivery.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]delivery.Delivery(nil), f.sent...)
}

func (f *fakeDeliverer) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

type fakeHistory struct {
	entries map[string][]transcript.Entry
	asked   []string
}

func (f *fakeHistory) History(_ context.Context, key string, n int) ([]transcript.Entry, error) {
	f.asked = append(f.asked, key)
	e := f.entries[key]
	if len(e) > n {
		e = e[len(e)-n:]
	}
	return e, nil
}

type env struct {
	t     *testing.T
	clk   *clock.Fake
	store *memory.Store
	chat  *fakeChat
	bg    *fakeBackground
	out   *fakeDeliverer
	hist  *fakeHistory
	s     *scheduler.Scheduler
	set   scheduler.Settings
	auth  scheduler.Authorizer // nil: none
	hints scheduler.HintText   // nil: none
	tools scheduler.ToolHealth // nil: none
}

var t0 = time.Date(2026, 3, 2, 8, 59, 0, 0, time.UTC) // a Monday

func defaultSettings() scheduler.Settings {
	return scheduler.Settings{Enabled: true, Location: time.UTC, CatchUpMissed: true, MaxCatchUp: 1,
		FailureAlert: scheduler.FailureAlert{After: 2, Cooldown: time.Hour}, RunRetention: 50}
}

func newEnv(t *testing.T, mod ...func(*scheduler.Settings)) *env {
	e := &env{t: t, clk: clock.NewFake(t0), store: memory.New(), chat: &fakeChat{},
		bg: &fakeBackground{result: "the result"}, out: &fakeDeliverer{},
		hist: &fakeHistory{entries: map[string][]transcript.Entry{}}, set: defaultSettings()}
	for _, m := range mod {
		m(&e.set)
	}
	e.s = e.newScheduler()
	return e
}

// newScheduler is a fresh scheduler over the same store (a restart).
func (e *env) newScheduler() *scheduler.Scheduler {
	n := 0
	var mu sync.Mutex
	return scheduler.New(scheduler.Options{Settings: e.set, DefaultAgent: "main"}, scheduler.Deps{
		Store: e.store, Clock: e.clk, Runner: e.chat, Background: e.bg, Deliverer: e.out, History: e.hist, Outbox: e.store,
		Log: zerolog.Nop(), Authorizer: e.auth, Hints: scheduler.HintsByPlatform{"discord": e.hints}, Tools: e.tools,
		NewID: func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id%d", n) },
	})
}

func (e *env) add(req scheduler.AddRequest) scheduler.Job {
	e.t.Helper()
	if req.CreatedIn == (binding.ConversationRef{}) {
		req.CreatedIn = chat
	}
	if req.Prompt == "" {
		req.Prompt = "say hi"
	}
	j, err := e.s.Add(ctx, req)
	if err != nil {
		e.t.Fatalf("Add: %v", err)
	}
	return j
}

func (e *env) tick() {
	e.t.Helper()
	if err := e.s.RunDue(ctx); err != nil {
		e.t.Fatalf("RunDue: %v", err)
	}
}

func (e *env) job(id string) scheduler.Job {
	e.t.Helper()
	j, ok, err := e.store.Job(ctx, id)
	if err != nil || !ok {
		e.t.Fatalf("job %s: ok=%v err=%v", id, ok, err)
	}
	return j
}

func (e *env) runs(id string) []scheduler.Run {
	e.t.Helper()
	rs, err := e.store.Runs(ctx, id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

var errBoom = errors.New("model unreachable")
