package delivery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
)

// A bot token (the shape redact knows) and a configured API key.
const (
	testBotToken = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
	testAPIKey   = "ollama-key-7f3a9c2e51d84b6f"
)

// TestDeliverRedactsChatText: a reply (handed to the turn's commit) and a
// tool send whose text holds the bot token or a configured API key are
// displayed and recorded redacted: the record's fixed text, the chat and
// the transcript hold the same text (issue 26.9, invariant 14).
func TestDeliverRedactsChatText(t *testing.T) {
	for _, tt := range []struct {
		name string
		turn bool
	}{{"tool send", false}, {"turn reply", true}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: f.sender, Outbox: f.store,
				Transcripts: f.tr, Bindings: f.bindings, Log: zerolog.Nop(), Redact: redact.New(testAPIKey)})
			key := sessionkey.ForConversation("main", conv("c1"))
			d := delivery.Delivery{ID: "turn:1", Target: conv("c1"), Text: "token " + testBotToken + " and key " + testAPIKey,
				Producer: delivery.Producer{Source: transcript.SourceMessageTool, AgentID: "main"}}
			var committed string
			var commit delivery.CommitFunc
			if tt.turn {
				d.Producer.TurnSessionKey = key
				commit = func(_ context.Context, r delivery.Receipt) error { committed = r.Text; return nil }
			}
			res, err := out.Deliver(context.Background(), d, commit)
			if err != nil {
				t.Fatal(err)
			}
			shown := f.sender.displayed["c1"]
			if len(shown) != 1 || leaks(shown[0]) || !strings.Contains(shown[0], "[redacted]") {
				t.Fatalf("displayed %q, want it redacted", shown)
			}
			recorded := res.Entry.Text
			if tt.turn {
				recorded = committed
			}
			if recorded != shown[0] {
				t.Fatalf("recorded %q, displayed %q: want the same redacted text", recorded, shown[0])
			}
			r, _, _ := f.store.GetDelivery(context.Background(), "turn:1")
			if r.Delivery.Text != shown[0] {
				t.Fatalf("outbox text %q, want the displayed text", r.Delivery.Text)
			}
		})
	}
}

func leaks(s string) bool {
	return strings.Contains(s, testBotToken[:12]) || strings.Contains(s, testAPIKey[:12])
}

// TestLiveRedactsStreamedText: a streamed reply that spells a configured
// key out over several updates never shows any of it (an end that may
// start a known secret waits for the next update), and its final display
// and entry are the same redacted text, the bot token's shape included.
func TestLiveRedactsStreamedText(t *testing.T) {
	f := newLiveFixture(t, 2000)
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: f.sender, Outbox: f.store,
		Transcripts: f.tr, Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop(), Redact: redact.New(testAPIKey)})
	l := out.Live(context.Background(), liveDelivery("turn:1"), delivery.LiveOptions{After: f.after.after})
	text := "Your key is "
	l.Update(text)
	f.sender.waitReqs(t, 1)
	for i := 1; i < len(testAPIKey); i += 3 {
		l.Update(text + testAPIKey[:i])
		f.after.fire(time.Second)
	}
	final := text + testAPIKey + " and the token " + testBotToken + "."
	if err := f.after.finishPaced(func() error {
		_, err := l.Finish(context.Background(), final)
		return err
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.sender.requests() {
		if leaks(r.text) || strings.Contains(r.text, testAPIKey[:4]) {
			t.Fatalf("a request showed part of a secret: %q", r.text)
		}
	}
	texts, _, _ := f.sender.display()
	es := f.entries(t)
	if len(texts) != 1 || len(es) != 1 || es[0].Text != texts[0] || !strings.Contains(texts[0], "[redacted]") {
		t.Fatalf("display %q, entries %+v: want one redacted text, recorded as displayed", texts, es)
	}
}
