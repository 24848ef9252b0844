package lane

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
)

// DefaultCapacity is how many tasks one key holds waiting when Options.Capacity is 0.
const DefaultCapacity = 1000

var (
	// ErrFull: the key's queue holds Capacity tasks already; the task was not accepted.
	ErrFull = errors.New("lane: queue full")
	// ErrClosed: the lanes were closed (the bot is stopping); the task was not accepted.
	ErrClosed = errors.New("lane: closed")
)

// Options are the lanes' settings.
type Options struct {
	// Capacity bounds the tasks waiting per key (default DefaultCapacity).
	Capacity int
}

// Deps are what the lanes work with.
type Deps struct {
	// Context is the context tasks run under (default: context.Background()); it is read when a task starts.
	Context func() context.Context
	// Log receives panics of tasks.
	Log zerolog.Logger
}

type task struct {
	name string
	f    func(context.Context)
}

// Lanes runs tasks in order per key (see the package doc).
type Lanes struct {
	opt Options
	d   Deps

	mu     sync.Mutex
	byKey  map[string][]task // pending tasks of a key whose goroutine runs
	closed bool
	idle   chan struct{} // closed when closed and no key has work
}

// New returns empty lanes. It starts nothing.
func New(opt Options, d Deps) *Lanes {
	if opt.Capacity <= 0 {
		opt.Capacity = DefaultCapacity
	}
	if d.Context == nil {
		d.Context = context.Background
	}
	return &Lanes{opt: opt, d: d, byKey: map[string][]task{}, idle: make(chan struct{})}
}

// Push queues f behind key's earlier tasks; name labels it in logs. It fails with ErrFull when key's queue is
// full and ErrClosed after Close, running nothing.
func (l *Lanes) Push(key, name string, f func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("%s on %s: %w", name, key, ErrClosed)
	}
	pending, running := l.byKey[key]
	if len(pending) >= l.opt.Capacity {
		return fmt.Errorf("%s on %s: %w (%d waiting)", name, key, ErrFull, len(pending))
	}
	l.byKey[key] = append(pending, task{name, f})
	if !running {
		go l.drain(key)
	}
	return nil
}

// drain runs key's tasks until none is left.
func (l *Lanes) drain(key string) {
	for {
		l.mu.Lock()
		pending := l.byKey[key]
		if len(pending) == 0 {
			delete(l.byKey, key)
			if l.closed && len(l.byKey) == 0 {
				close(l.idle)
			}
			l.mu.Unlock()
			return
		}
		t := pending[0]
		pending[0] = task{}
		l.byKey[key] = pending[1:]
		l.mu.Unlock()
		l.run(key, t)
	}
}

func (l *Lanes) run(key string, t task) {
	defer func() {
		if r := recover(); r != nil {
			l.d.Log.Error().Str("lane", key).Str("task", t.name).Interface("panic", r).Msg("lane task panicked")
		}
	}()
	t.f(l.d.Context())
}

// Close stops accepting tasks; accepted ones still run. Idempotent.
func (l *Lanes) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if len(l.byKey) == 0 {
		close(l.idle)
	}
}

// Wait blocks until Close was called and every accepted task ran, or ctx ends (its error, wrapped).
func (l *Lanes) Wait(ctx context.Context) error {
	select {
	case <-l.idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lane: tasks still running: %w", ctx.Err())
	}
}
