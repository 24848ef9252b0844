package lane_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/lane"
)

const wait = 10 * time.Second

// TestOrderPerKey: one key's tasks run one at a time in push order.
func TestOrderPerKey(t *testing.T) {
	l := lane.New(lane.Options{}, lane.Deps{})
	var mu sync.Mutex
	var got []int
	running := 0
	done := make(chan struct{})
	for i := range 100 {
		if err := l.Push("a", "t", func(context.Context) {
			mu.Lock()
			running++
			if running > 1 {
				t.Errorf("two tasks of one key at once")
			}
			got = append(got, i)
			running--
			mu.Unlock()
			if i == 99 {
				close(done)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
}

// TestKeysIndependent: a key blocked in a task does not hold up another key.
func TestKeysIndependent(t *testing.T) {
	l := lane.New(lane.Options{}, lane.Deps{})
	release := make(chan struct{})
	defer close(release)
	if err := l.Push("slow", "block", func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	if err := l.Push("slow", "behind", func(context.Context) { close(ran) }); err != nil {
		t.Fatal(err)
	}
	other := make(chan struct{})
	if err := l.Push("fast", "other", func(context.Context) { close(other) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other:
	case <-time.After(wait):
		t.Fatal("another key waited behind a blocked one")
	}
	select {
	case <-ran:
		t.Fatal("a task ran before the one ahead of it on its key")
	default:
	}
}

// TestBounded: past Capacity waiting tasks a key refuses with ErrFull; other keys still accept.
func TestBounded(t *testing.T) {
	l := lane.New(lane.Options{Capacity: 2}, lane.Deps{})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	push := func(key string, f func(context.Context)) error { return l.Push(key, "t", f) }
	if err := push("a", func(context.Context) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started // the running task no longer waits
	for range 2 {
		if err := push("a", func(context.Context) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := push("a", func(context.Context) {}); !errors.Is(err, lane.ErrFull) {
		t.Fatalf("third waiting task: %v, want ErrFull", err)
	}
	if err := push("b", func(context.Context) {}); err != nil {
		t.Fatalf("another key: %v", err)
	}
}

// TestCloseDrains: Close refuses new tasks, accepted ones run, Wait returns after them; Wait is bounded by ctx.
func TestCloseDrains(t *testing.T) {
	l := lane.New(lane.Options{}, lane.Deps{})
	release := make(chan struct{})
	ran := make(chan struct{})
	if err := l.Push("a", "block", func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	if err := l.Push("a", "queued", func(context.Context) { close(ran) }); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.Close()
	if err := l.Push("b", "late", func(context.Context) {}); !errors.Is(err, lane.ErrClosed) {
		t.Fatalf("push after close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with work left and ctx done: %v", err)
	}
	close(release)
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case <-ran:
	default:
		t.Fatal("Wait returned before an accepted task ran")
	}
}

// TestPanicKeepsLane: a panicking task is logged; its key's later tasks still run, under the Deps context.
func TestPanicKeepsLane(t *testing.T) {
	type ctxKey struct{}
	base := context.WithValue(context.Background(), ctxKey{}, "base")
	l := lane.New(lane.Options{}, lane.Deps{Context: func() context.Context { return base }, Log: zerolog.Nop()})
	if err := l.Push("a", "boom", func(context.Context) { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	got := make(chan any, 1)
	if err := l.Push("a", "after", func(ctx context.Context) { got <- ctx.Value(ctxKey{}) }); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != "base" {
			t.Fatalf("task context value %v", v)
		}
	case <-time.After(wait):
		t.Fatal("the task after a panic did not run")
	}
}
