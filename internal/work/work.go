// Package work counts the work a long-lived component accepted and must
// finish before its Run returns.
//
// Invariant: accepting and draining agree under one lock. Add never races
// Wait (as a sync.WaitGroup re-armed during a Wait would): once Close ran,
// or once Wait saw the count at zero, Add refuses and the caller must not
// start the work (it refuses it visibly or leaves it to be resumed).
package work

import "sync"

// Group counts accepted units of work. The zero value is ready to use.
type Group struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int
	closed bool
}

// Add accepts one unit; false once the group is closed.
func (g *Group) Add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// Done finishes one unit accepted by Add.
func (g *Group) Done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n < 0 {
		panic("work: Done without Add")
	}
	if g.n == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
}

// Close refuses every later unit; units accepted before still run.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Idle blocks until no unit runs and leaves the group open (tests settle
// a component between steps with it).
func (g *Group) Idle() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idleLocked()
}

func (g *Group) idleLocked() {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.cond.Wait()
	}
}

// Wait blocks until no unit runs, then closes the group: work accepted
// while others still ran (a turn's follow-up) is waited for too, and work
// offered after Wait returned is refused.
func (g *Group) Wait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idleLocked()
	g.closed = true // under the same lock: no Add slips in between
}
