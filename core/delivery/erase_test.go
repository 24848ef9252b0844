package delivery_test

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// TestEraseEntryBlanksOutboxText: a deleted message's text leaves its
// outbox record (Delivery.Text, DisplayedText and a live delivery's
// LiveParts); the record stays.
func TestEraseEntryBlanksOutboxText(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	rec := delivery.Record{
		Delivery: delivery.Delivery{ID: "d1", Target: conv("c1"), Text: "secret part one secret part two"},
		State:    delivery.StateFailed, MessageIDs: []string{"m1"}, DisplayedText: "secret part one",
		Live: true, LiveParts: []string{"secret part one"},
	}
	if err := f.store.PutDelivery(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for _, e := range []transcript.Entry{{DeliveryID: "d1"}, {DeliveryID: "d1"}, {DeliveryID: "unknown"}, {}} {
		if err := f.out.EraseEntry(ctx, e); err != nil {
			t.Fatalf("EraseEntry(%q): %v", e.DeliveryID, err)
		}
	}
	got, ok, err := f.store.GetDelivery(ctx, "d1")
	if err != nil || !ok {
		t.Fatalf("record gone: %v %v", ok, err)
	}
	if got.Delivery.Text != "" || got.DisplayedText != "" || len(got.LiveParts) != 0 || got.State != delivery.StateFailed || len(got.MessageIDs) != 1 {
		t.Fatalf("record after erase = %+v", got)
	}
}
