package session_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/model/echo"
)

// chanLocker is a TurnLocker shared by "processes": one buffered channel
// per key. waiting receives the key each time Lock is entered.
type chanLocker struct {
	mu      sync.Mutex
	m       map[string]chan struct{}
	waiting chan string
}

func newChanLocker() *chanLocker {
	return &chanLocker{m: map[string]chan struct{}{}, waiting: make(chan string, 16)}
}

func (l *chanLocker) ch(key string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.m[key]
	if c == nil {
		c = make(chan struct{}, 1)
		l.m[key] = c
	}
	return c
}

func (l *chanLocker) Lock(ctx context.Context, key string) (func(), error) {
	c := l.ch(key)
	select {
	case l.waiting <- key:
	default:
	}
	select {
	case c <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-c }) }, nil
}

func TestTurnWaitsForTheSessionLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	locks := newChanLocker()
	f := newFixture(t, fixtureOptions{provider: g, turns: locks})
	c := ref("c1")

	// Another process runs a turn of this session.
	elsewhere, err := locks.Lock(context.Background(), keyOf("c1"))
	if err != nil {
		t.Fatal(err)
	}
	<-locks.waiting // our own Lock call above
	f.say(c, "hello")
	if got := <-locks.waiting; got != keyOf("c1") {
		t.Fatalf("manager locked %q, want %q", got, keyOf("c1"))
	}
	// The manager is inside Lock, so the turn has not started.
	select {
	case <-g.entered:
		t.Fatal("the turn started while another process held the session lock")
	default:
	}
	elsewhere()
	g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()

	// The turn gave the lock back.
	select {
	case locks.ch(keyOf("c1")) <- struct{}{}:
	default:
		t.Fatal("the session lock is still held after the turn")
	}
}

func TestNilTurnLockerKeepsLocalQueueing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c2"), "hi")
	f.settle()
	if n := len(f.entries(keyOf("c2"))); n != 2 {
		t.Fatalf("entries = %d, want user + reply", n)
	}
}
