package discord

import (
	"context"
	"sync"
)

// eventQueue runs gateway event work off discordgo's read loop, so the
// gateway never blocks on the store or the network. Work is ordered per
// key (a conversation: a channel, thread or DM channel id): one
// conversation's events run one at a time in arrival order, and different
// conversations run in parallel, so a conversation stuck behind a slow
// send (a rate-limit storm, retries) never delays the others. It is
// unbounded: events are small, and a lane's goroutine exits when its
// queue is empty.
type eventQueue struct {
	g      *Gateway
	mu     sync.Mutex
	lanes  map[string][]queued // key -> pending work; present while its goroutine runs
	closed bool
	done   chan struct{}
}

type queued struct {
	name string
	f    func(context.Context)
}

func newEventQueue(g *Gateway) *eventQueue {
	return &eventQueue{g: g, lanes: map[string][]queued{}, done: make(chan struct{})}
}

// push queues work on key's lane; after close it is dropped (the bot is stopping).
func (q *eventQueue) push(key, name string, f func(context.Context)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	items, running := q.lanes[key]
	q.lanes[key] = append(items, queued{name, f})
	if !running {
		go q.run(key)
	}
}

// run works through key's lane until it is empty.
func (q *eventQueue) run(key string) {
	for {
		q.mu.Lock()
		items := q.lanes[key]
		if len(items) == 0 {
			delete(q.lanes, key)
			if q.closed && len(q.lanes) == 0 {
				close(q.done)
			}
			q.mu.Unlock()
			return
		}
		it := items[0]
		q.lanes[key] = items[1:]
		q.mu.Unlock()
		q.exec(it)
	}
}

func (q *eventQueue) exec(it queued) {
	defer q.g.recoverHandler(it.name)
	it.f(q.g.workCtx())
}

// close stops accepting work; queued work still runs. Idempotent.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	if len(q.lanes) == 0 {
		close(q.done)
	}
}

// wait blocks until every lane has run what was queued before close.
func (q *eventQueue) wait() { <-q.done }
