package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// TestRule1ExceptionsAreDiagnostics: a delivery displayed without a
// transcript entry is reported as a warn diagnostic with its reason, once
// (not again when the delivered id is delivered again), is kept on its
// outbox record, and comes back in the Result for producers that keep a
// run record.
func TestRule1ExceptionsAreDiagnostics(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	bindings := &fakeBindings{bound: map[string]binding.Record{"t-other": {ID: "b-other", TargetSessionKey: "agent:research:subagent:9"}}}
	var got []delivery.Diagnostic
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: newFakeSender(), Outbox: st, Transcripts: transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk}), Bindings: bindings, Clock: clk, Log: zerolog.Nop(), Diagnose: func(d delivery.Diagnostic) { got = append(got, d) }})
	tests := []struct {
		d      delivery.Delivery
		reason string
	}{
		{delivery.Delivery{ID: "job:1:run:a", Target: conv("t-other"), Text: "result", Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, delivery.SkipOtherAgent},
		{delivery.Delivery{ID: "native:1", Target: conv("c2"), Native: true, Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, delivery.SkipNativeOnly},
		{delivery.Delivery{ID: "plain:1", Target: conv("c3"), Text: "hi", Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, ""},
	}
	for _, tc := range tests {
		for attempt := range 2 { // the second Deliver of a delivered id reports nothing new
			res, err := out.Deliver(ctx, tc.d, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := res.Diagnostic(tc.d.ID)
			if ok != (tc.reason != "") || d.Reason != tc.reason || (ok && (d.Level != delivery.DiagnosticWarn || d.DeliveryID != tc.d.ID || d.Detail == "")) {
				t.Fatalf("%s attempt %d: diagnostic %+v ok=%v", tc.d.ID, attempt, d, ok)
			}
		}
		rec, _, err := st.GetDelivery(ctx, tc.d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := delivery.RecordDiagnostic(rec); ok != (tc.reason != "") || d.Reason != tc.reason {
			t.Fatalf("%s: record diagnostic %+v ok=%v", tc.d.ID, d, ok)
		}
	}
	if len(got) != 2 || got[0].Reason != delivery.SkipOtherAgent || got[0].SessionKey != "agent:research:subagent:9" || got[1].Reason != delivery.SkipNativeOnly {
		t.Fatalf("reported %+v", got)
	}
}
