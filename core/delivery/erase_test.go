package delivery_test

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// TestRecordEraserBlanksOutboxText: a deleted message's text leaves its
// outbox record (Delivery.Text and DisplayedText); the record stays.
func TestRecordEraserBlanksOutboxText(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	rec := delivery.Record{
		Delivery: delivery.Delivery{ID: "d1", Text: "secret part one secret part two"},
		State:    delivery.StateFailed, MessageIDs: []string{"m1"}, DisplayedText: "secret part one",
	}
	if err := st.PutDelivery(ctx, rec); err != nil {
		t.Fatal(err)
	}
	er := delivery.RecordEraser{Store: st}
	for _, e := range []transcript.Entry{{DeliveryID: "d1"}, {DeliveryID: "d1"}, {DeliveryID: "unknown"}, {}} {
		if err := er.EraseEntry(ctx, e); err != nil {
			t.Fatalf("EraseEntry(%q): %v", e.DeliveryID, err)
		}
	}
	got, ok, err := st.GetDelivery(ctx, "d1")
	if err != nil || !ok {
		t.Fatalf("record gone: %v %v", ok, err)
	}
	if got.Delivery.Text != "" || got.DisplayedText != "" || got.State != delivery.StateFailed || len(got.MessageIDs) != 1 {
		t.Fatalf("record after erase = %+v", got)
	}
}
