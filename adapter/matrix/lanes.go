package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentbot/agentbot/core/lane"
)

// laneOf is the key of the conversation lane an event is handled on, from what the event shows: its room and the
// thread it names (a thread root is a claim the Gateway checks before it routes anything; the key only orders).
// A DM is its room. A text command runs on its conversation's command lane, beside its messages, not behind them:
// a !stop is answered while a message of the same conversation waits for the reply it streams (as a Discord slash
// command is, off the message lane). An edit or redaction starts on its room's lane and continues on the lane of the
// message it changes once that is known (continueOn). A !cron run waits for the job's whole run (its reply is the
// run's outcome): it runs on a lane of its own event, so the conversation's later commands (a !stop of that very
// run among them) are not queued behind it.
func laneOf(in Inbound) string {
	switch {
	case in.Kind == KindInvite:
		return "invite|" + in.RoomID
	case in.Kind == KindMessage && isCommand(in.Body):
		if c, err := ParseCommand(in.Body); err == nil && c.Name == "cron" && c.Sub == "run" {
			return "run|" + laneKey(in.RoomID, in.ThreadRoot) + "|" + in.EventID
		}
		return "command|" + laneKey(in.RoomID, in.ThreadRoot)
	default:
		return laneKey(in.RoomID, in.ThreadRoot)
	}
}

// laneKey is the lane of the messages shown in room (in thread root, "" for none).
func laneKey(room, root string) string {
	if root == "" {
		return room
	}
	return room + "|" + root
}

// isCommand: body parses as a text command, or as one gone wrong (its error is the command's reply).
func isCommand(body string) bool {
	_, err := ParseCommand(body)
	return !errors.Is(err, ErrNotCommand)
}

// continueOn runs f on lane key behind the events already queued there, as part of the event being handled under
// ctx (its batch's token is saved after f ran). Outside a lane (a Handler called directly) f runs now.
func continueOn(ctx context.Context, key, name string, f func(context.Context)) {
	at, ok := ctx.Value(laneCtxKey{}).(laneCtx)
	if !ok {
		f(ctx)
		return
	}
	at.batch.add()
	err := at.lanes.Push(key, name, func(lctx context.Context) {
		defer at.batch.finish()
		f(withLane(lctx, at.lanes, at.batch))
	})
	if err != nil { // stopping or full: the event's rest is done here, late rather than never
		at.batch.finish()
		f(ctx)
	}
}

type laneCtxKey struct{}

type laneCtx struct {
	lanes *lane.Lanes
	batch *batch
}

func withLane(ctx context.Context, lanes *lane.Lanes, b *batch) context.Context {
	return context.WithValue(ctx, laneCtxKey{}, laneCtx{lanes, b})
}

// batch counts one /sync batch's events still being handled; its token may be saved once it is done.
type batch struct {
	token   string
	mu      sync.Mutex
	pending int
	handled chan struct{} // closed when pending reaches 0 after done
	ended   bool
}

func newBatch(token string) *batch {
	return &batch{token: token, pending: 1, handled: make(chan struct{})} // 1: the dispatch itself (done)
}

func (b *batch) add() {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
}

func (b *batch) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending--; b.pending == 0 && !b.ended {
		b.ended = true
		close(b.handled)
	}
}

// done ends the dispatch of the batch: from now on only its handed events count.
func (b *batch) done() { b.finish() }

// saver saves the tokens of handled batches, in batch order: a token is saved only when its batch and every
// earlier one are handled.
type saver struct {
	tokens  TokenStore
	batches chan *batch // bounded: /sync waits when this many batches are still being handled
	failed  chan error  // the first failed save; the saver stops
	quit    chan struct{}
	exited  chan struct{}
}

// maxBatchesInFlight bounds how far /sync runs ahead of the events it handed.
const maxBatchesInFlight = 64

func newSaver(tokens TokenStore) *saver {
	sv := &saver{tokens: tokens, batches: make(chan *batch, maxBatchesInFlight), failed: make(chan error, 1),
		quit: make(chan struct{}), exited: make(chan struct{})}
	go sv.run()
	return sv
}

func (sv *saver) run() {
	defer close(sv.exited)
	for b := range sv.batches {
		select {
		case <-b.handled:
		case <-sv.quit:
			return
		}
		if err := sv.tokens.SaveSyncToken(context.Background(), b.token); err != nil {
			sv.failed <- fmt.Errorf("matrix: sync: %w", err)
			return
		}
	}
}

// stop saves the tokens of the batches handled by the time ctx ends, then ends the saver. Only the /sync loop
// sends batches, and it calls stop after its last send.
func (sv *saver) stop(ctx context.Context) {
	close(sv.batches)
	select {
	case <-sv.exited:
	case <-ctx.Done():
		close(sv.quit)
		<-sv.exited
	}
}
