package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Recover finishes deliveries a previous process left unfinished: pending
// ones (maybe sent, maybe not) and sent ones whose transcript write did not
// happen. Each is delivered again under its own id, so the sender's
// idempotency (nonce, reconciliation) prevents a second message and the
// transcript gets the entry once. An interrupted turn reply is written by
// Outbound itself (its turn is gone), so the chat still shows nothing the
// transcript lacks.
//
// Only deliveries created before `before` are taken, and only once their
// owner is gone (invariant 19): a delivery this process is still working
// on (a Deliver paused by a rate limit, a live message whose pump runs,
// however old) is never taken; with a Claimer (several processes), one
// whose claim another process holds is skipped: a live message's pump
// renews its claim while it lives, so what a dead process left is
// finished once its lease has run out. A record is read again under the
// conversation's lock (and the claim) before it is touched. So Recover
// may run periodically in any process.
func (o *Outbound) Recover(ctx context.Context, before time.Time) (recovered int, err error) {
	var todo []Record
	for _, st := range []PendingState{StatePending, StateSent} {
		recs, err := o.outbox.Deliveries(ctx, st, 0)
		if err != nil {
			return 0, fmt.Errorf("recover deliveries: %w", err)
		}
		for _, r := range recs {
			if r.CreatedAt.Before(before) {
				todo = append(todo, r)
			}
		}
	}
	slices.SortFunc(todo, func(a, b Record) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, rec := range todo {
		if o.busy(rec.Delivery.ID) || o.heldConv(rec.Delivery.Target) {
			// Its owner is this process, still at work on it; or the
			// conversation is held by a live owner (an ACP turn): the
			// next pass takes it, without waiting on that turn here.
			continue
		}
		if rec.Live && rec.State == StatePending {
			if err := o.recoverLive(ctx, rec); err != nil {
				if errors.Is(err, ErrClaimed) || errors.Is(err, errOwned) {
					continue
				}
				o.log.Warn().Err(err).Str("delivery", rec.Delivery.ID).Msg("recovered live delivery failed")
				continue
			}
			recovered++
			continue
		}
		if fn := o.recoverers[rec.Delivery.Producer.Source]; fn != nil {
			handled, err := fn(ctx, rec)
			if err != nil {
				o.log.Warn().Err(err).Str("delivery", rec.Delivery.ID).Msg("recovered delivery failed")
			}
			if handled {
				if err == nil {
					recovered++
				}
				continue
			}
		}
		if _, err := o.deliver(ctx, rec.Delivery, nil, true); err != nil {
			if errors.Is(err, errOwned) {
				continue
			}
			if errors.Is(err, ErrClaimed) {
				o.log.Debug().Str("delivery", rec.Delivery.ID).Msg("recover: another process is finishing it")
				continue
			}
			o.log.Warn().Err(err).Str("delivery", rec.Delivery.ID).Msg("recovered delivery failed")
			continue
		}
		recovered++
	}
	return recovered, nil
}

// errOwned: Recover met a delivery whose owner is alive (this process
// works on it) or that was finished meanwhile; it is left alone.
var errOwned = errors.New("delivery owned by live work")

// unknownText stands for a part whose displayed text is not known (an
// earlier attempt's): it matches no text, so the part is edited.
const unknownText = "\x00unknown"

// recoverLive finishes a live delivery whose owner is gone: every part
// shows its recorded text, the last with InterruptedMark, none with
// controls; a part whose id was not recorded is posted again under its
// idempotency key (the sender returns the one displayed, if any). Then the
// entry is written once.
//
// rec is what Recover listed, maybe long before: under the conversation's
// lock (and the claim, with several processes) the record is read again,
// and one that its owner is still working on, or that was finished
// meanwhile, is left alone (errOwned).
func (o *Outbound) recoverLive(ctx context.Context, listed Record) error {
	id := listed.Delivery.ID
	ls, err := o.liveSenderFor(listed.Delivery.Target)
	if err != nil {
		return fmt.Errorf("recover live delivery %s: %w", id, err)
	}
	unlock := o.locks.lock(listed.Delivery.Target.Normalize().Key())
	defer unlock()
	if o.busy(id) {
		return errOwned
	}
	if o.claimer != nil {
		if err := o.claim(ctx, id); err != nil {
			return err
		}
	}
	rec, found, err := o.outbox.GetDelivery(ctx, id)
	if err != nil {
		return fmt.Errorf("recover live delivery %s: read outbox: %w", id, err)
	}
	if !found || !rec.Live || rec.State != StatePending {
		return errOwned // finished meanwhile
	}
	if len(rec.LiveParts) == 0 {
		// Nothing was about to be displayed.
		rec.State, rec.Reason, rec.UpdatedAt = StateSkipped, "live-nothing-shown", o.clock.Now()
		if err := o.outbox.PutDelivery(ctx, rec); err != nil {
			return fmt.Errorf("abandon live delivery %s: %w", id, err)
		}
		o.observe(rec)
		return nil
	}
	// The parts without a recorded id may have been displayed: a sender
	// whose idempotency key does not outlive its platform's restarts looks
	// them up (Resend, from FirstAttempt on) before posting.
	d := rec.Delivery
	d.Resend, d.FirstAttempt = true, rec.CreatedAt
	l := &Live{o: o, ls: ls, d: d, rec: rec, started: true, recovered: true,
		opt: LiveOptions{Interval: DefaultLiveInterval, After: time.After}, kick: make(chan struct{}, 1), last: map[int]time.Time{}, attempted: map[int]bool{},
		cgen: 1, tried: make(chan struct{})}
	defer o.hold(id)()
	l.ids = slices.Clone(rec.MessageIDs)
	if len(l.ids) > len(rec.LiveParts) {
		l.ids = l.ids[:len(rec.LiveParts)]
	}
	for range l.ids {
		// What each part shows now is not known: edit every one.
		l.parts, l.ctl = append(l.parts, unknownText), append(l.ctl, -1)
	}
	l.fixed = slices.Clone(rec.LiveParts[:len(rec.LiveParts)-1])
	l.want, l.final = strings.Join(rec.LiveParts, "")+InterruptedMark, true
	l.loop(ctx)
	if l.err != nil {
		return l.err
	}
	return nil
}
