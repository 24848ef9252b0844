package bot

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/store/bolt"
)

// notifyPruner signals every prune it passes on.
type notifyPruner struct {
	deliveryPruner
	done chan bolt.DeliveryPrune
}

func (p notifyPruner) PruneDeliveries(ctx context.Context, before time.Time, dry bool) (bolt.DeliveryPrune, error) {
	n, err := p.deliveryPruner.PruneDeliveries(ctx, before, dry)
	p.done <- n
	return n, err
}

// seedDeliveries writes n records of state created at.
func seedDeliveries(t *testing.T, st *bolt.Store, prefix string, n int, state delivery.PendingState, at time.Time) {
	t.Helper()
	for i := range n {
		r := delivery.Record{Delivery: delivery.Delivery{ID: fmt.Sprintf("%s-%d", prefix, i), Text: "a reply"}, State: state, CreatedAt: at, UpdatedAt: at}
		if err := st.PutDelivery(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppPrunesDeliveriesPastRetention(t *testing.T) {
	t.Parallel()
	st, err := bolt.Open(t.TempDir()+"/bot.db", bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	seedDeliveries(t, st, "old", 3, delivery.StateDelivered, now.Add(-8*24*time.Hour))
	seedDeliveries(t, st, "pending", 1, delivery.StatePending, now.Add(-8*24*time.Hour))
	seedDeliveries(t, st, "recent", 2, delivery.StateDelivered, now.Add(-6*24*time.Hour))
	cfg := config.Default()
	cfg.Store.DeliveryRetentionDays = 7
	a := &App{cfg: cfg, clock: clk, log: zerolog.Nop()}
	p := notifyPruner{deliveryPruner: st, done: make(chan bolt.DeliveryPrune)}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { a.pruneDeliveries(ctx, p, tick); close(stopped) }()
	if n := <-p.done; n.Rows != 3 {
		t.Fatalf("first prune removed %d, want 3", n.Rows)
	}
	clk.Advance(25 * time.Hour) // the recent ones are now past 7 days old
	tick <- now
	if n := <-p.done; n.Rows != 2 {
		t.Fatalf("hourly prune removed %d, want 2", n.Rows)
	}
	cancel()
	<-stopped
	left, err := st.Deliveries(t.Context(), "", 0)
	if err != nil || len(left) != 1 || left[0].State != delivery.StatePending {
		t.Fatalf("left %v (%v), want only the pending one", left, err)
	}
}
