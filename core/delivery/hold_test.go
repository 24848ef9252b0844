package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// A delivery that names its session (Producer.Session) is written there,
// wherever its conversation routes when it is confirmed (an ACP turn's
// message after a /focus moved the thread); one that names none follows
// the route.
func TestProducerSessionOwnsTheEntry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner := "agent:script:acp:t1"
	f.bindings.bound["t1"] = binding.Record{ID: "b-t1", TargetSessionKey: "agent:research:subagent:9"}
	cases := []struct {
		name, id, session, want string
		skip                    string
	}{
		{"named session", "a1", owner, owner, ""},
		{"the route (another agent's)", "a2", "", "agent:research:subagent:9", delivery.SkipOtherAgent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := f.out.Deliver(ctx, delivery.Delivery{ID: c.id, Target: conv("t1"), Text: "line " + c.id,
				Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "script", Session: c.session}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.SkipReason != c.skip {
				t.Fatalf("skip %q, want %q", res.SkipReason, c.skip)
			}
			if c.skip == "" && (!res.Written || res.SessionKey != c.want) {
				t.Fatalf("result %+v, want written to %s", res, c.want)
			}
		})
	}
	if es := f.entries(t, owner); len(es) != 1 || es[0].DeliveryID != "a1" {
		t.Errorf("owner's entries %+v", es)
	}
}

// farFuture is a recovery cutoff past every record.
var farFuture = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// While an owner holds a conversation (Outbound.Hold), a recovery pass
// leaves that conversation's unfinished deliveries for a later pass
// instead of waiting for the owner; once released, the next pass takes
// them. Other conversations are recovered meanwhile.
func TestRecoverSkipsHeldConversation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, c := range []string{"held", "free"} {
		if err := f.store.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "n-" + c, Target: conv(c), Text: "notice " + c,
			Producer: delivery.Producer{Source: transcript.SourceNotice}}, State: delivery.StatePending}); err != nil {
			t.Fatal(err)
		}
	}
	release := f.out.Hold(conv("held"))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := f.out.Recover(ctx, farFuture)
		done <- result{n, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		// A failure bound only: the pass returns at once unless it waits
		// on the held conversation.
		release()
		t.Fatal("the recovery pass waited on the held conversation")
	}
	if r.err != nil || r.n != 1 {
		t.Fatalf("pass while held: %d recovered, %v; want the free conversation's only", r.n, r.err)
	}
	release()
	release() // once only
	n, err := f.out.Recover(ctx, farFuture)
	if err != nil || n != 1 {
		t.Fatalf("pass after release: %d recovered, %v; want the held conversation's", n, err)
	}
	if es := f.entries(t, sessionkey.ForConversation("main", conv("held"))); len(es) != 1 {
		t.Errorf("held conversation's entries %+v", es)
	}
}

// WithConversation (a user message's entry, a deletion's barrier) does
// not wait for a conversation an owner holds: the owner may wait minutes
// on a person, and the caller is a gateway's event lane.
func TestWithConversationDoesNotWaitForHold(t *testing.T) {
	f := newFixture(t)
	release := f.out.Hold(conv("held"))
	defer release()
	ran := make(chan error, 1)
	go func() { ran <- f.out.WithConversation(conv("held"), func() error { return nil }) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		// A failure bound only: it returns at once unless it waits.
		release()
		t.Fatal("WithConversation waited for the held conversation")
	}
}

// Erasing a deleted message's copy (a deleted thread's) does not wait for
// a conversation an owner holds: the binding that would end the owner's
// turn ends only after the erasure.
func TestEraseDoesNotWaitForHold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := f.out.Deliver(ctx, delivery.Delivery{ID: "intro", Target: conv("held"), Text: "an intro",
		Producer: delivery.Producer{Source: transcript.SourceIntro}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := f.out.Hold(conv("held"))
	defer release()
	ran := make(chan error, 1)
	go func() { ran <- f.out.EraseEntry(ctx, res.Entry) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		// A failure bound only: it returns at once unless it waits.
		release()
		t.Fatal("EraseEntry waited for the held conversation")
	}
	if rec, _, _ := f.store.GetDelivery(ctx, "intro"); rec.Delivery.Text != "" {
		t.Errorf("the record keeps the text %q", rec.Delivery.Text)
	}
}

// A delivery finished before is found again where its entry was written: a
// repeated Deliver of its id (a catch-up after a restart hands the same
// message again) after the conversation's route moved writes nothing into
// the new route (soak seed 101: a refusal notice in two transcripts).
func TestRedeliveredIDKeepsItsSession(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := "agent:script:acp:t2"
	f.bindings.bound["t2"] = binding.Record{ID: "b-t2", TargetSessionKey: first}
	d := delivery.Delivery{ID: "acp-refused:m1", Target: conv("t2"), Text: "you may not talk to this agent",
		Producer: delivery.Producer{Source: transcript.SourceNotice}}
	if res, err := f.out.Deliver(ctx, d, nil); err != nil || res.SessionKey != first {
		t.Fatalf("first deliver: %+v, %v", res, err)
	}
	delete(f.bindings.bound, "t2") // the binding ended: the thread routes to its own session now
	res, err := f.out.Deliver(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionKey != first {
		t.Errorf("repeated deliver wrote to %q, want %q (where the entry is)", res.SessionKey, first)
	}
	keys, err := f.store.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, k := range keys {
		for _, e := range f.entries(t, k) {
			if e.DeliveryID == d.ID {
				held++
			}
		}
	}
	if held != 1 {
		t.Errorf("the delivery is in %d entries, want 1", held)
	}
}
