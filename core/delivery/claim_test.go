package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// fakeClaims is a delivery.Claimer over a shared outbox, with leases on
// the fake clock (what store/postgres does with owner and lease_until).
type fakeClaims struct {
	mu    sync.Mutex
	clk   *clock.Fake
	store *memory.Store
	owner map[string]string
	until map[string]time.Time
}

func (f *fakeClaims) ClaimDelivery(ctx context.Context, id, owner string, lease time.Duration) (bool, error) {
	if _, ok, err := f.store.GetDelivery(ctx, id); err != nil || !ok {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clk.Now()
	if cur := f.owner[id]; cur != "" && cur != owner && now.Before(f.until[id]) {
		return false, nil
	}
	f.owner[id], f.until[id] = owner, now.Add(lease)
	return true, nil
}

// blockingSender holds every send until released.
type blockingSender struct {
	*fakeSender
	entered chan string
	release chan struct{}
}

func (b *blockingSender) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	b.entered <- d.ID
	<-b.release
	return b.fakeSender.Send(ctx, d)
}

func TestClaimKeepsRecoverOffAnotherProcessesDelivery(t *testing.T) {
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk})
	claims := &fakeClaims{clk: clk, store: st, owner: map[string]string{}, until: map[string]time.Time{}}
	b := &fakeBindings{bound: map[string]binding.Record{}}
	slow := &blockingSender{fakeSender: newFakeSender(), entered: make(chan string), release: make(chan struct{})}
	other := newFakeSender()
	procA := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main", Owner: "a", Lease: time.Minute}, delivery.OutboundDeps{Sender: slow, Outbox: st, Transcripts: tr, Bindings: b, Clock: clk, Log: zerolog.Nop(), Claimer: claims})
	procB := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main", Owner: "b", Lease: time.Minute}, delivery.OutboundDeps{Sender: other, Outbox: st, Transcripts: tr, Bindings: b, Clock: clk, Log: zerolog.Nop(), Claimer: claims})
	ctx := context.Background()

	done := make(chan error, 1)
	go func() {
		_, err := procA.Deliver(ctx, delivery.Delivery{ID: "d1", Target: conv("c1"), Text: "hi", Producer: delivery.Producer{Source: transcript.SourceJob}}, nil)
		done <- err
	}()
	<-slow.entered // a is sending d1 now
	n, err := procB.Recover(ctx, clk.Now().Add(time.Hour))
	if err != nil || n != 0 || other.sends != 0 {
		t.Fatalf("b recovered a delivery a is sending: n=%d err=%v sends=%d", n, err, other.sends)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A process that died holding a claim: its lease runs out, then b finishes it.
	if err := st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "d2", Target: conv("c1"), Text: "left", Producer: delivery.Producer{Source: transcript.SourceJob}},
		State: delivery.StatePending, CreatedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := claims.ClaimDelivery(ctx, "d2", "dead", time.Minute); !ok {
		t.Fatal("setup claim refused")
	}
	if n, _ := procB.Recover(ctx, clk.Now().Add(time.Hour)); n != 0 || other.sends != 0 {
		t.Fatalf("b took d2 under a live lease: n=%d sends=%d", n, other.sends)
	}
	clk.Advance(2 * time.Minute)
	if n, err := procB.Recover(ctx, clk.Now().Add(time.Hour)); err != nil || n != 1 || other.sends != 1 {
		t.Fatalf("after the lease b recovered n=%d err=%v sends=%d; want 1, 1", n, err, other.sends)
	}
	// A delivered record answers a repeated Deliver without a claim.
	if _, err := procB.Deliver(ctx, delivery.Delivery{ID: "d1", Target: conv("c1"), Text: "hi", Producer: delivery.Producer{Source: transcript.SourceJob}}, nil); err != nil {
		t.Fatalf("repeat of a delivered delivery elsewhere: %v", err)
	}
}
