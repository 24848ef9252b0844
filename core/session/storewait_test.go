package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store"
	"github.com/agentbot/agentbot/store/memory"
)

// outageOutbox is an outbox whose reads of turn replies fail with
// store.ErrUnavailable (what the PostgreSQL driver returns once its own
// backoff is spent) until the test ends the outage.
type outageOutbox struct {
	*memory.Store
	mu    sync.Mutex
	down  bool
	fails int
}

func (o *outageOutbox) GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error) {
	o.mu.Lock()
	if o.down && strings.HasPrefix(id, "turn:") {
		o.fails++
		o.mu.Unlock()
		return delivery.Record{}, false, fmt.Errorf("postgres: get delivery: database unavailable: %w", store.ErrUnavailable)
	}
	o.mu.Unlock()
	return o.Store.GetDelivery(ctx, id)
}

// TestTurnReplyWaitsOutAStoreOutage: a turn's final reply that fails
// because the store stayed away past the driver's backoff is not dropped
// with a log line: the turn tries it again (same delivery id) until the
// store is back, and the answer is displayed once and recorded. On the old
// code the reply was only logged ("turn reply not delivered") and the chat
// showed nothing until the next process start.
func TestTurnReplyWaitsOutAStoreOutage(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	st := memory.New()
	outbox := &outageOutbox{Store: st, down: true}
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk})
	bs := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	sender := &fakeSender{ids: map[string][]string{}, fail: map[string]error{}}
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: sender, Outbox: outbox,
		Transcripts: tr, Bindings: bs, Clock: clk, Log: zerolog.Nop()})
	waits := make(chan time.Duration, 100)
	fire := make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time { waits <- d; return fire }
	m := session.New(session.Options{AccountID: "default", Agents: []session.Agent{{ID: "main", Name: "Assistant",
		Provider: echo.New(), MaxHistory: 50, MaxToolSteps: 4}}},
		session.Deps{Outbound: out, Router: delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: bs}),
			Bindings: bs, Transcripts: tr, Store: memory.NewSessions(), Clock: clk, Log: zerolog.Nop(), After: after})
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	conv := ref("c-outage")
	if err := m.HandleMessage(context.Background(), session.Message{Conversation: conv, MessageID: "901", AuthorID: "u1",
		AuthorName: "alice", Text: "hello through an outage"}); err != nil {
		t.Fatal(err)
	}
	// The reply failed and the turn waits to try again.
	for range 2 {
		select {
		case <-waits:
		case <-time.After(30 * time.Second):
			t.Fatal("the turn did not wait for the store after its reply failed")
		}
		fire <- time.Time{} // still down: another failure, another wait
	}
	outbox.mu.Lock()
	outbox.down = false
	outbox.mu.Unlock()
	close(fire) // the next try (and any later wait) goes ahead at once
	m.Settle()
	shown := sender.to("c-outage")
	if len(shown) != 1 || !strings.Contains(shown[0].Text, "hello through an outage") {
		t.Fatalf("displayed %+v, want the one reply", shown)
	}
	var replies int
	es, err := tr.Entries(context.Background(), keyOf("c-outage"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Role == transcript.RoleAssistant {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("transcript %+v, want one reply entry", es)
	}
}
