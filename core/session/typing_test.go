package session_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/model/echo"
)

// fakeTypist records typing calls, in order with the sender's sends.
type fakeTypist struct {
	mu    sync.Mutex
	calls []string // conversation ids
	seen  chan string
}

func newFakeTypist() *fakeTypist { return &fakeTypist{seen: make(chan string, 64)} }

func (f *fakeTypist) Typing(_ context.Context, conv binding.ConversationRef) error {
	f.mu.Lock()
	f.calls = append(f.calls, conv.ConversationID)
	f.mu.Unlock()
	f.seen <- conv.ConversationID
	return nil
}

func (f *fakeTypist) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeTypist) wait(t *testing.T, conv string) {
	t.Helper()
	select {
	case got := <-f.seen:
		if got != conv {
			t.Fatalf("typing in %s, want %s", got, conv)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no typing call in %s", conv)
	}
}

// manualAfter fires only when the test says so, and records the waits asked for.
type manualAfter struct {
	mu    sync.Mutex
	c     chan time.Time
	waits []time.Duration
}

func newManualAfter() *manualAfter { return &manualAfter{c: make(chan time.Time)} }

func (m *manualAfter) after(d time.Duration) <-chan time.Time {
	m.mu.Lock()
	m.waits = append(m.waits, d)
	m.mu.Unlock()
	return m.c
}

func (m *manualAfter) asked() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.waits)
}

// fire ends one wait; it returns once a typing loop took it.
func (m *manualAfter) fire(t *testing.T) {
	t.Helper()
	select {
	case m.c <- time.Time{}:
	case <-time.After(5 * time.Second):
		t.Fatal("no typing loop was waiting")
	}
}

func TestTurnShowsTypingUntilReply(t *testing.T) {
	g := newGate(echo.New())
	typ, tk := newFakeTypist(), newManualAfter()
	f := newFixture(t, fixtureOptions{provider: g, typist: typ, after: tk.after})
	f.say(ref("c1"), "hello")
	g.waitEntered(t)
	tk.fire(t)        // the grace passes while the model works
	typ.wait(t, "c1") // shown
	tk.fire(t)
	typ.wait(t, "c1") // renewed
	if len(f.sender.to("c1")) != 0 {
		t.Fatal("replied before the model answered")
	}
	g.release <- struct{}{}
	f.settle()
	if got := f.sender.to("c1"); len(got) != 1 {
		t.Fatalf("want one reply, got %d", len(got))
	}
	if got := typ.list(); !slices.Equal(got, []string{"c1", "c1"}) {
		t.Fatalf("typing calls = %v", got)
	}
	if got := tk.asked(); !slices.Equal(got, []time.Duration{time.Second, 8 * time.Second, 8 * time.Second}) {
		t.Fatalf("waits = %v, want the 1s grace then 8s renewals", got)
	}
	select {
	case tk.c <- time.Time{}:
		t.Fatal("a renewal loop still runs after the reply")
	default:
	}
}

func TestBoundSubagentTypesInItsThread(t *testing.T) {
	g := newGate(echo.New())
	typ, tk := newFakeTypist(), newManualAfter()
	f := newFixture(t, fixtureOptions{provider: g, typist: typ, after: tk.after})
	res, err := f.m.Spawn(context.Background(), spawnReq("planner", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	tk.fire(t)
	typ.wait(t, res.Thread.ConversationID)
	g.release <- struct{}{}
	f.settle()
	if got := typ.list(); !slices.Equal(got, []string{res.Thread.ConversationID}) {
		t.Fatalf("typing calls = %v, want only the thread %s", got, res.Thread.ConversationID)
	}
}

func TestUnboundSubagentTypesWhereItAnnounces(t *testing.T) {
	g := newGate(echo.New())
	typ, tk := newFakeTypist(), newManualAfter()
	f := newFixture(t, fixtureOptions{provider: g, typist: typ, after: tk.after})
	if _, err := f.m.Spawn(context.Background(), spawnReq("planner", false, ref("c1"))); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	tk.fire(t)
	typ.wait(t, "c1")
	g.release <- struct{}{}
	f.settle()
}

// A quick answer shows no indicator: the grace had not passed.
func TestQuickTurnShowsNoTyping(t *testing.T) {
	typ, tk := newFakeTypist(), newManualAfter()
	f := newFixture(t, fixtureOptions{typist: typ, after: tk.after})
	f.say(ref("c1"), "hello")
	f.settle()
	if len(f.sender.to("c1")) != 1 || len(typ.list()) != 0 {
		t.Fatalf("replies %d typing %v: want a reply and no indicator", len(f.sender.to("c1")), typ.list())
	}
}

// Two pieces of work answering in one conversation share one renewal loop:
// the per-channel rate limit sees one indicator, not one per piece.
func TestOverlappingWorkSharesOneTypingLoop(t *testing.T) {
	g := newGate(echo.New())
	typ, tk := newFakeTypist(), newManualAfter()
	f := newFixture(t, fixtureOptions{provider: g, typist: typ, after: tk.after})
	if _, err := f.m.Spawn(context.Background(), spawnReq("planner", false, ref("c1"))); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	tk.fire(t)
	typ.wait(t, "c1")
	f.say(ref("c1"), "meanwhile")
	g.waitEntered(t)
	g.release <- struct{}{}
	g.release <- struct{}{}
	f.settle()
	if got := typ.list(); len(got) != 1 {
		t.Fatalf("typing calls = %v, want one shared indicator", got)
	}
	if got := tk.asked(); len(got) != 2 {
		t.Fatalf("waits %v: want one loop (grace, one renewal wait)", got)
	}
}
