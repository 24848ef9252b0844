package matrix

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Deliverer is the outbound send owner (core/delivery.Outbound) as the adapter uses it.
type Deliverer interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
	// Abandon finishes an unconfirmed delivery that will not be sent (not even by the recovery at the next start).
	Abandon(ctx context.Context, id, reason string) (bool, error)
}

// ThreadsOptions are the thread creator's settings.
type ThreadsOptions struct {
	// Attempts is how many times a root post that failed transiently is tried (default 4); RetryBackoff the wait
	// before the second (default 1s, doubling).
	Attempts     int
	RetryBackoff time.Duration
}

// ThreadsDeps are what the thread creator works with.
type ThreadsDeps struct {
	// Outbound posts the root: the root is a message the room displays, so it is a transcript entry of the room's
	// session like any bot message (Rule 1), written by the one writer.
	Outbound Deliverer
	// NewNonce makes each CreateThread call's delivery id unique (default: 8 random bytes); tests inject it.
	NewNonce func() string
}

// Threads is core/session.Threads for Matrix: a thread is a root event the bot posts in the room (its text is the
// thread's name); the thread's conversation is {matrix, "$root", parent "!room"}.
//
// A call is idempotent across its own retries, including a homeserver restart in between (which makes the homeserver
// forget transaction ids): the root's delivery id is derived from the room, the name and a nonce of the call, every
// retry goes through Outbound under that id (so it is a resend that first looks for the root an earlier attempt
// posted, by the delivery mark in its content), and mautrix's own retries (which would repeat the transaction id
// blindly) are off for the root post. Two calls are two threads, even with the same name (two spawns with one label
// are two subagents, each with its own thread).
type Threads struct {
	opt ThreadsOptions
	d   ThreadsDeps
}

// NewThreads returns the thread creator. It does no I/O.
func NewThreads(opt ThreadsOptions, d ThreadsDeps) (*Threads, error) {
	if d.Outbound == nil {
		return nil, errors.New("matrix: threads need an outbound deliverer")
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 4
	}
	if opt.RetryBackoff <= 0 {
		opt.RetryBackoff = time.Second
	}
	if d.NewNonce == nil {
		d.NewNonce = func() string {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			return hex.EncodeToString(b)
		}
	}
	return &Threads{opt: opt, d: d}, nil
}

// threadDeliveryID is the root's delivery id: a digest of the room, the name and the call's nonce (delivery ids
// are transaction ids: short, no '/').
func threadDeliveryID(room, name, nonce string) string {
	h := sha256.Sum256([]byte(room + "\x00" + name + "\x00" + nonce))
	return "thread:" + hex.EncodeToString(h[:12])
}

// CreateThread implements core/session.Threads. parent is a room, or a thread (the new thread goes into its room:
// Matrix threads do not nest). A DM has no threads.
func (t *Threads) CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	room, _, ok := roomOf(parent)
	if !ok {
		return binding.ConversationRef{}, fmt.Errorf("matrix: create thread %q: %w: %q is not a Matrix room", name, ErrRejected, parent.ConversationID)
	}
	n := parent.Normalize()
	roomRef := binding.ConversationRef{Channel: Platform, AccountID: n.AccountID, ConversationID: room}
	d := delivery.Delivery{ID: threadDeliveryID(room, name, t.d.NewNonce()), Target: roomRef, Text: name,
		Producer: delivery.Producer{Source: transcript.SourceNotice, Meta: map[string]string{"thread": "root"}}}
	// The root post is never retried blindly by mautrix (same transaction id, which a restarted homeserver posts
	// again): each retry here is Outbound's resend, which looks first.
	pctx := mautrix.WithMaxRetries(ctx, 0)
	backoff := t.opt.RetryBackoff
	var err error
	for attempt := 0; attempt < t.opt.Attempts; attempt++ {
		if attempt > 0 {
			tm := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				tm.Stop()
				return binding.ConversationRef{}, fmt.Errorf("matrix: create thread %q in %s: %w (last: %w)", name, room, ctx.Err(), err)
			case <-tm.C:
			}
			backoff *= 2
		}
		var res delivery.Result
		res, err = t.d.Outbound.Deliver(pctx, d, nil)
		if err == nil {
			if len(res.MessageIDs) != 1 {
				return binding.ConversationRef{}, fmt.Errorf("matrix: create thread %q in %s: %w: the root took %d events", name, room, ErrRejected, len(res.MessageIDs))
			}
			return binding.ConversationRef{Channel: Platform, AccountID: n.AccountID, ConversationID: res.MessageIDs[0], ParentConversationID: room}.Normalize(), nil
		}
		if !errors.Is(err, delivery.ErrTransient) {
			break
		}
	}
	if errors.Is(err, delivery.ErrTransient) {
		// The caller is told the thread was not created: a root the last attempt may still have posted must not
		// appear later from the outbox's recovery (a root nobody is bound to). One that did land stays, recorded
		// nowhere: the homeserver's answer never came.
		if _, aerr := t.d.Outbound.Abandon(context.WithoutCancel(ctx), d.ID, "thread creation gave up"); aerr != nil {
			err = fmt.Errorf("%w (and abandoning the root delivery failed: %w)", err, aerr)
		}
	}
	return binding.ConversationRef{}, fmt.Errorf("matrix: create thread %q in %s: %w", name, room, err)
}
