package discord

import "sync"

// tracker counts work the adapter accepted and must finish before Run
// returns. Accepting and draining agree under one lock: once close has run,
// add refuses, so no Add can race the Wait that drain starts (a WaitGroup
// must not be re-armed while a Wait on a zero counter is in progress).
type tracker struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add accepts one unit of work; false once the tracker is closed (the
// caller refuses the work instead of starting it).
func (t *tracker) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// done finishes one unit of work accepted by add.
func (t *tracker) done() { t.wg.Done() }

// close refuses all later work; work accepted before it still runs.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// wait blocks until every accepted unit is done. Call after close.
func (t *tracker) wait() { t.wg.Wait() }
