package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// TestRunRecoveryFinishesWhatWasLeftPending: the outbox's own loop
// finishes a delivery left pending longer than its age (once: displayed
// and written), leaves a younger one alone, and returns nil when stopped.
func TestRunRecoveryFinishesWhatWasLeftPending(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // the fixture's clock
	for _, r := range []delivery.Record{
		{Delivery: delivery.Delivery{ID: "old", Target: conv("c1"), Text: "left pending", Producer: delivery.Producer{Source: transcript.SourceJob}},
			State: delivery.StatePending, CreatedAt: now.Add(-time.Hour)},
		{Delivery: delivery.Delivery{ID: "young", Target: conv("c1"), Text: "in flight", Producer: delivery.Producer{Source: transcript.SourceJob}},
			State: delivery.StatePending, CreatedAt: now},
	} {
		if err := f.store.PutDelivery(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- f.out.RunRecovery(ctx, time.Millisecond, time.Minute) }()
	deadline := time.After(10 * time.Second)
	for {
		if ok, err := f.out.Delivered(ctx, "old"); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the loop never finished the delivery left pending")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunRecovery returned %v when stopped", err)
	}
	if ok, _ := f.out.Delivered(context.Background(), "young"); ok {
		t.Fatal("the loop took a delivery younger than its age")
	}
	f.sender.mu.Lock()
	defer f.sender.mu.Unlock()
	if got := f.sender.displayed["c1"]; len(got) != 1 || got[0] != "left pending" {
		t.Fatalf("displayed %v, want the pending delivery once", got)
	}
}
