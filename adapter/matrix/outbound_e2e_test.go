package matrix

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// notDiscord is the Discord sender of these tests: a Matrix delivery must never reach it.
type notDiscord struct{ t *testing.T }

func (s notDiscord) Send(_ context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	s.t.Errorf("delivery %s to %+v reached the Discord sender", d.ID, d.Target)
	return delivery.Receipt{}, delivery.ErrRejected
}

type noBindings struct{}

func (noBindings) ResolveByConversation(binding.ConversationRef) (binding.Record, bool) {
	return binding.Record{}, false
}
func (noBindings) Touch(string, time.Time) {}

// TestOutboundToMatrixThroughMux: core's Outbound, over a Mux of a Discord and a Matrix sender, displays a
// delivery targeted at a Matrix room, and one at a thread (its target as a user writes it), in the real room; a
// live (streamed) message is posted and edited there. Each transcript entry is written once into the
// conversation's own session and holds the event ids and text displayed (Rule 1).
func TestOutboundToMatrixThroughMux(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	st := memory.New()
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.Real{}})
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: platform.New(platform.Platform{Name: "discord", Sender: notDiscord{t}}, platform.Platform{Name: "matrix", Sender: DeliverySender{Client: c}}),
		Outbox: st, Transcripts: tr, Bindings: noBindings{}, Log: zerolog.Nop()})
	entries := func(conv binding.ConversationRef) []transcript.Entry {
		t.Helper()
		es, err := tr.Entries(ctx, sessionkey.ForConversation("main", conv), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}

	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}
	res, err := out.Deliver(ctx, delivery.Delivery{ID: "job:1:run:1", Target: room, Text: "the nightly report",
		Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := e.event(t, res.MessageIDs[0])
	if ev["sender"] != e.bot.UserID || ev["content"].(map[string]any)["body"] != "the nightly report" {
		t.Fatalf("room shows %v", ev)
	}
	if es := entries(room); len(es) != 1 || es[0].Text != "the nightly report" || strings.Join(es[0].MessageIDs, ",") != res.MessageIDs[0] {
		t.Fatalf("room entries %+v, want one holding %s", es, res.MessageIDs[0])
	}

	root, err := c.CreateThread(ctx, e.room, "Task", "root-1", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	thread, ok, err := sessionkey.ParseMatrixTarget("matrix:" + e.room + "/" + root)
	if !ok || err != nil {
		t.Fatalf("thread target: %v, %v", ok, err)
	}
	res, err = out.Deliver(ctx, delivery.Delivery{ID: "announce:1", Target: thread, Text: "done in the thread",
		Producer: delivery.Producer{Source: transcript.SourceAnnounce, AgentID: "main"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := e.event(t, res.MessageIDs[0])["content"].(map[string]any)["m.relates_to"].(map[string]any)
	if rel["rel_type"] != "m.thread" || rel["event_id"] != root {
		t.Fatalf("thread message relates %v, want m.thread of %s", rel, root)
	}
	if es := entries(thread); len(es) != 1 || es[0].Text != "done in the thread" || es[0].MessageIDs[0] != res.MessageIDs[0] {
		t.Fatalf("thread entries %+v", es)
	}
	if es := entries(room); len(es) != 1 {
		t.Fatalf("the thread's message was written into the room's session too: %+v", es)
	}

	if !out.LiveTo(room) {
		t.Fatal("Outbound says Matrix shows no live messages")
	}
	l := out.Live(ctx, delivery.Delivery{ID: "turn:1", Target: room, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}},
		delivery.LiveOptions{Controls: delivery.Controls{StopRun: "7"}, Interval: 50 * time.Millisecond})
	l.Update("Hello")
	if err := l.Posted(ctx); err != nil {
		t.Fatal(err)
	}
	lr, err := l.Finish(ctx, "Hello, world")
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.MessageIDs) != 1 {
		t.Fatalf("live message ids %v", lr.MessageIDs)
	}
	if got := e.shownText(t, lr.MessageIDs[0], "Hello, world"); got != "Hello, world" {
		t.Fatalf("room shows %q", got)
	}
	if first := e.event(t, lr.MessageIDs[0])["content"].(map[string]any)["body"]; first != "Hello" {
		t.Fatalf("the live message was posted as %q, want Hello (then edited)", first)
	}
	es := entries(room)
	if len(es) != 2 || es[1].Text != "Hello, world" || es[1].MessageIDs[0] != lr.MessageIDs[0] {
		t.Fatalf("room entries after the live message %+v", es)
	}
}

// shownText returns what eventID displays as alice reads the room: its body, or its latest edit's new body. It
// waits (up to waitTimeout) for want: Dendrite serves an edit a moment after it was sent.
func (e *env) shownText(t *testing.T, eventID, want string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		body := ""
		resp, err := e.ali.Messages(context.Background(), id.RoomID(e.room), "", "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		for _, ev := range resp.Chunk { // newest first: the first edit found is the latest
			var mc struct {
				Body      string `json:"body"`
				RelatesTo struct {
					RelType string `json:"rel_type"`
					EventID string `json:"event_id"`
				} `json:"m.relates_to"`
				NewContent struct {
					Body string `json:"body"`
				} `json:"m.new_content"`
			}
			if json.Unmarshal(ev.Content.VeryRaw, &mc) != nil {
				continue
			}
			if mc.RelatesTo.RelType == "m.replace" && mc.RelatesTo.EventID == eventID {
				body = mc.NewContent.Body
				break
			}
			if ev.ID.String() == eventID {
				body = mc.Body
				break
			}
		}
		if body == want || time.Now().After(deadline) {
			return body
		}
		<-time.After(20 * time.Millisecond) // polling the homeserver's read model until it caught up
	}
}

// TestLiveRecoveryAfterHomeserverRestartNoDuplicate: the bot died right after posting a live message's first part
// (the outbox holds the part's text, not its id) and Dendrite restarted since (it forgot the transaction id).
// Recover, through the Mux, finds the posted part instead of posting it again, marks it interrupted, and writes
// the entry once with its event id.
func TestLiveRecoveryAfterHomeserverRestartNoDuplicate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := memory.New()
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.Real{}})
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	d := delivery.Delivery{ID: "turn:9", Target: room, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}}
	// What a Live records before its first post, then the post the dead process made.
	now := time.Now()
	if err := st.PutDelivery(ctx, delivery.Record{Delivery: d, State: delivery.StatePending, Live: true, LiveParts: []string{"Hello"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	posted, err := DeliverySender{Client: e.client(t)}.PostLive(ctx, d, 0, "Hello", delivery.Controls{StopRun: "7"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitMarked(t, "turn:9", 1) // displayed (Dendrite loses an event its sync API has not taken when it stops)
	e.srv.Restart(t)

	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: platform.New(platform.Platform{Name: "discord", Sender: notDiscord{t}}, platform.Platform{Name: "matrix", Sender: DeliverySender{Client: e.client(t)}}),
		Outbox: st, Transcripts: tr, Bindings: noBindings{}, Log: zerolog.Nop()})
	if n, err := out.Recover(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("recovered %d, err %v", n, err)
	}
	want := "Hello" + delivery.InterruptedMark
	if got := e.shownText(t, posted, want); got != want {
		t.Fatalf("room shows %q, want %q", got, want)
	}
	if got := e.marked(t, "turn:9"); len(got) != 1 || got[0] != posted {
		t.Fatalf("room shows turn:9 as %v, want only %s (no duplicate)", got, posted)
	}
	es, err := tr.Entries(ctx, sessionkey.ForConversation("main", room), 0, 10)
	if err != nil || len(es) != 1 || es[0].Text != want || len(es[0].MessageIDs) != 1 || es[0].MessageIDs[0] != posted {
		t.Fatalf("entries %+v (%v), want one holding %s", es, err, posted)
	}
}
