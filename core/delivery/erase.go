package delivery

import (
	"context"
	"fmt"

	"github.com/agentbot/agentbot/core/transcript"
)

// RecordEraser erases the outbox's copy of a deleted message's text
// (invariant 17): the record of the entry's delivery keeps its state, ids
// and times, without Delivery.Text and DisplayedText. It implements
// transcript.Eraser.
type RecordEraser struct {
	Store Store
}

// EraseEntry blanks the text of e's delivery record, if e has one.
func (r RecordEraser) EraseEntry(ctx context.Context, e transcript.Entry) error {
	if e.DeliveryID == "" {
		return nil
	}
	rec, ok, err := r.Store.GetDelivery(ctx, e.DeliveryID)
	if err != nil {
		return fmt.Errorf("erase delivery %s: %w", e.DeliveryID, err)
	}
	if !ok || (rec.Delivery.Text == "" && rec.DisplayedText == "") {
		return nil
	}
	rec.Delivery.Text, rec.DisplayedText = "", ""
	if err := r.Store.PutDelivery(ctx, rec); err != nil {
		return fmt.Errorf("erase delivery %s: %w", e.DeliveryID, err)
	}
	return nil
}
