package delivery

import (
	"context"
	"fmt"

	"github.com/agentbot/agentbot/core/transcript"
)

// EraseEntry erases the outbox's copy of a deleted message's text
// (invariant 17): the record of the entry's delivery keeps its state, ids
// and times, without Delivery.Text, DisplayedText and a live delivery's LiveParts. It implements
// transcript.Eraser. It runs under the conversation's send lock, as
// Deliver's own record writes do, so a delivery still finishing (its
// message displayed, its record not yet final) cannot write the text back
// after it.
func (o *Outbound) EraseEntry(ctx context.Context, e transcript.Entry) error {
	if e.DeliveryID == "" {
		return nil
	}
	prev, found, err := o.outbox.GetDelivery(ctx, e.DeliveryID)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("erase delivery %s: %w", e.DeliveryID, err)
		}
		return err
	}
	if !o.heldConv(prev.Delivery.Target) {
		// A held conversation (Hold: an ACP turn, which may wait on a
		// person) has no other delivery finishing there, and the
		// holder's own have no entry yet: nothing to wait for.
		unlock := o.locks.lock(prev.Delivery.Target.Key())
		defer unlock()
	}
	rec, found, err := o.outbox.GetDelivery(ctx, e.DeliveryID)
	if err != nil {
		return fmt.Errorf("erase delivery %s: %w", e.DeliveryID, err)
	}
	if !found || (rec.Delivery.Text == "" && rec.DisplayedText == "" && len(rec.LiveParts) == 0) {
		return nil
	}
	rec.Delivery.Text, rec.DisplayedText, rec.LiveParts = "", "", nil
	if err := o.outbox.PutDelivery(ctx, rec); err != nil {
		return fmt.Errorf("erase delivery %s: %w", e.DeliveryID, err)
	}
	return nil
}
