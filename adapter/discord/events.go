package discord

import (
	"context"
	"sync"
)

// eventQueue runs gateway event work one at a time in arrival order on a
// single worker, so discordgo's read loop never blocks on the store or the
// network. It is unbounded: events are small and the worker is fast
// (a store append and a queue push per message).
type eventQueue struct {
	a      *Adapter
	mu     sync.Mutex
	cond   *sync.Cond
	items  []queued
	closed bool
	done   chan struct{}
}

type queued struct {
	name string
	f    func(context.Context)
}

func newEventQueue(a *Adapter) *eventQueue {
	q := &eventQueue{a: a, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// push queues work; after close it is dropped (the bot is stopping).
func (q *eventQueue) push(name string, f func(context.Context)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.items = append(q.items, queued{name, f})
	q.cond.Signal()
}

func (q *eventQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.items) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.items) == 0 {
			q.mu.Unlock()
			return
		}
		it := q.items[0]
		q.items = q.items[1:]
		q.mu.Unlock()
		q.exec(it)
	}
}

func (q *eventQueue) exec(it queued) {
	defer q.a.recoverHandler(it.name)
	it.f(q.a.workCtx())
}

// close stops accepting work; queued work still runs.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// wait blocks until the worker has run everything queued before close.
func (q *eventQueue) wait() { <-q.done }
