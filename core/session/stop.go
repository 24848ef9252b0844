package session

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrStopped is why a run ended early: someone ran /stop. A stopped turn
// posts nothing (its user entry stays, it was displayed); a stopped job
// turn returns it.
var ErrStopped = errors.New("stopped")

// Run is a piece of work /stop can end: a turn (of a conversation's or a
// bound subagent's session, or an in-chat job's) or a subagent's task.
type Run struct {
	ID    uint64 // this run, so a stop never ends the next one by mistake
	Key   string // session key
	Kind  Kind
	Label string // a subagent's label
	// Owner is whose run it is: the user whose message started the turn,
	// the job's creator, or the subagent's spawner ("" = the system).
	Owner string
}

type running struct {
	run    Run
	cancel context.CancelCauseFunc
}

var runSeq atomic.Uint64

// startRun registers the work about to run in key under a context /stop
// cancels (with cause ErrStopped); end removes it.
func (m *Manager) startRun(ctx context.Context, key, owner string) (context.Context, func()) {
	rctx, cancel := context.WithCancelCause(ctx)
	r := Run{ID: runSeq.Add(1), Key: key, Owner: owner}
	if in, ok := m.Info(key); ok {
		r.Kind, r.Label = in.Kind, in.Label
	}
	m.rmu.Lock()
	m.runs[key] = &running{run: r, cancel: cancel}
	m.rmu.Unlock()
	return rctx, func() {
		m.rmu.Lock()
		if cur := m.runs[key]; cur != nil && cur.run.ID == r.ID {
			delete(m.runs, key)
		}
		m.rmu.Unlock()
		cancel(nil)
	}
}

// Running returns the run in progress in session key, if any.
func (m *Manager) Running(key string) (Run, bool) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if r := m.runs[key]; r != nil {
		return r.run, true
	}
	return Run{}, false
}

// Stop ends run if it is still the one in progress: its model call is
// cancelled (context), not left to run. It reports whether it stopped it.
// The caller decided the actor may (core/authz MayStop).
func (m *Manager) Stop(run Run) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	r := m.runs[run.Key]
	if r == nil || r.run.ID != run.ID {
		return false
	}
	r.cancel(ErrStopped)
	delete(m.runs, run.Key)
	return true
}

// stopped reports whether ctx ended because of /stop.
func stopped(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrStopped) }
