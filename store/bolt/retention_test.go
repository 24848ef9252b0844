package bolt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
)

func TestPruneDeliveries(t *testing.T) {
	old := pruneChunk
	pruneChunk = 3 // several chunks, each resuming where the last stopped
	t.Cleanup(func() { pruneChunk = old })
	s := openTemp(t)
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cutoff := base.Add(10 * 24 * time.Hour)
	states := []delivery.PendingState{delivery.StateDelivered, delivery.StateFailed, delivery.StatePending, delivery.StateSent}
	want := map[string]bool{} // id -> kept
	for i := range 40 {
		st := states[i%len(states)]
		at := base.Add(time.Duration(i) * 12 * time.Hour) // 20 days: half before the cutoff
		id := fmt.Sprintf("d%02d", i)
		if err := s.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: id, Text: "x"}, State: st, CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		want[id] = !at.Before(cutoff) || (st != delivery.StateDelivered && st != delivery.StateFailed)
	}
	removable := 0
	for _, kept := range want {
		if !kept {
			removable++
		}
	}
	dry, err := s.PruneDeliveries(ctx, cutoff, true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Rows != removable || dry.Bytes <= 0 {
		t.Fatalf("dry run: %+v, want %d rows and their bytes", dry, removable)
	}
	if all, _ := s.Deliveries(ctx, "", 0); len(all) != 40 {
		t.Fatalf("a dry run removed records: %d left", len(all))
	}
	got, err := s.PruneDeliveries(ctx, cutoff, false)
	if err != nil {
		t.Fatal(err)
	}
	if got != dry {
		t.Fatalf("pruned %+v, the dry run said %+v", got, dry)
	}
	all, err := s.Deliveries(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, r := range all {
		left[r.Delivery.ID] = true
	}
	for id, kept := range want {
		if left[id] != kept {
			t.Errorf("delivery %s: kept=%v, want %v", id, left[id], kept)
		}
		if _, ok, _ := s.GetDelivery(ctx, id); ok != kept {
			t.Errorf("GetDelivery(%s) found=%v, want %v", id, ok, kept)
		}
	}
	if again, _ := s.PruneDeliveries(ctx, cutoff, false); again.Rows != 0 {
		t.Fatalf("second prune removed %d more", again.Rows)
	}
}
