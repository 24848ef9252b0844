package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

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
