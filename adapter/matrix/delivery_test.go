package matrix

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"maunium.net/go/mautrix/id"
)

func TestMessageFor(t *testing.T) {
	ref := func(conv, parent string) binding.ConversationRef {
		return binding.ConversationRef{Channel: "matrix", ConversationID: conv, ParentConversationID: parent}
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := delivery.Persona{Name: "Researcher", AvatarURL: "mxc://hs/a"}
	tests := []struct {
		name    string
		d       delivery.Delivery
		want    Message
		wantErr bool
	}{
		{"room", delivery.Delivery{ID: "d", Target: ref("!r:hs", ""), Text: "t", ReplyTo: "$x", Resend: true, FirstAttempt: at, Persona: p},
			Message{DeliveryID: "d", RoomID: "!r:hs", Text: "t", ReplyTo: "$x", Resend: true, Since: at}, false},
		{"thread under persona", delivery.Delivery{ID: "d", Target: ref("$root", "!r:hs"), Text: "t", ViaWebhook: true, Persona: p},
			Message{DeliveryID: "d", RoomID: "!r:hs", ThreadRoot: "$root", Text: "t", Persona: Persona{Name: "Researcher", AvatarURL: "mxc://hs/a"}}, false},
		{"dm (its room is looked up when sending)", delivery.Delivery{ID: "d", Target: ref("user:@a:hs", ""), Text: "t"},
			Message{DeliveryID: "d", Text: "t", dmUser: "@a:hs"}, false},
		{"dm of no Matrix user", delivery.Delivery{ID: "d", Target: ref("user:123", ""), Text: "t"}, Message{}, true},
		{"not matrix", delivery.Delivery{ID: "d", Target: binding.ConversationRef{Channel: "discord", ConversationID: "123"}, Text: "t"}, Message{}, true},
		{"thread without room", delivery.Delivery{ID: "d", Target: ref("$root", ""), Text: "t"}, Message{}, true},
		{"native", delivery.Delivery{ID: "d", Target: ref("!r:hs", ""), Native: true}, Message{}, true},
		{"interaction", delivery.Delivery{ID: "d", Target: ref("!r:hs", ""), Interaction: &delivery.Interaction{ID: "i"}}, Message{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := messageFor(tt.d)
			if tt.wantErr {
				if !errors.Is(err, ErrRejected) || !errors.Is(err, delivery.ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The delivery.Sender for the wiring step: a thread delivery under a persona posts as its ghost; a resend with
// Shown parts posts nothing again; a redacted root returns the shown parts with ErrDestinationGone.
func TestDeliverySenderAgainstDendrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	root, err := c.CreateThread(ctx, e.room, "Task", "root-d", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	var s delivery.Sender = DeliverySender{Client: c}
	d := delivery.Delivery{ID: "dd1", Target: binding.ConversationRef{Channel: "matrix", ConversationID: root, ParentConversationID: e.room},
		Text: longText(130_000), ViaWebhook: true, Persona: delivery.Persona{Name: "Researcher"}, FirstAttempt: time.Now()}
	rc, err := s.Send(ctx, d)
	if err != nil || len(rc.MessageIDs) != 3 {
		t.Fatalf("send: %v, %d parts", err, len(rc.MessageIDs))
	}
	if ev := e.event(t, rc.MessageIDs[2]); ev["sender"] != "@agentbot_researcher:localhost" {
		t.Fatalf("sender = %v", ev["sender"])
	}
	e.waitMarked(t, "dd1", 3)
	d.Resend, d.Shown = true, rc.MessageIDs[:1]
	again, err := DeliverySender{Client: e.client(t)}.Send(ctx, d)
	if err != nil || !reflect.DeepEqual(again.MessageIDs, rc.MessageIDs) || !again.Duplicate {
		t.Fatalf("resend: %+v, %v; want %v as a duplicate", again, err, rc.MessageIDs)
	}
	if got := e.marked(t, "dd1"); len(got) != 3 {
		t.Fatalf("room shows %d parts after the resend, want 3", len(got))
	}
	if _, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(root)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for len(e.event(t, root)["content"].(map[string]any)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the root never showed as redacted")
		}
		<-time.After(20 * time.Millisecond) // Dendrite applies a redaction asynchronously
	}
	gone, err := s.Send(ctx, d)
	if !errors.Is(err, delivery.ErrDestinationGone) || !reflect.DeepEqual(gone.MessageIDs, rc.MessageIDs[:1]) || gone.Text == "" || !strings.HasPrefix(d.Text, gone.Text) {
		t.Fatalf("send after redaction: %v, ids %v; want ErrDestinationGone with the shown part", err, gone.MessageIDs)
	}
}

// TestSplitLive: live parts add up to the text and each fits a post and its edits as posted (with "@room"
// defused: 3 bytes more each), even for a text made of nothing but "@room".
func TestSplitLive(t *testing.T) {
	var s DeliverySender
	for _, text := range []string{"short", longText(130_000), strings.Repeat("@room", 30_000), strings.Repeat("<&>", 40_000)} {
		parts := s.SplitLive(text)
		if strings.Join(parts, "") != text {
			t.Fatalf("parts of a %d-byte text do not add up to it", len(text))
		}
		for i, p := range parts {
			if n := JSONLen(Defuse(p)); n > liveBudget || p == "" {
				t.Fatalf("part %d of %d: %d bytes as posted (budget %d)", i, len(parts), n, liveBudget)
			}
		}
	}
}

// TestLiveMessageRefusals: a Matrix live message cannot carry buttons (the Stop control is left out), post under
// a persona, or go anywhere but a Matrix room or thread.
func TestLiveMessageRefusals(t *testing.T) {
	room := binding.ConversationRef{Channel: "matrix", ConversationID: "!r:hs"}
	if _, err := liveMessage(delivery.Delivery{ID: "d", Target: room}, delivery.Controls{StopRun: "7"}); err != nil {
		t.Fatalf("stop control: %v", err)
	}
	for name, tc := range map[string]struct {
		d delivery.Delivery
		c delivery.Controls
	}{
		"buttons": {delivery.Delivery{ID: "d", Target: room}, delivery.Controls{Buttons: []delivery.Button{{CustomID: "acp:1:0"}}}},
		"persona": {delivery.Delivery{ID: "d", Target: room, ViaWebhook: true, Persona: delivery.Persona{Name: "R"}}, delivery.Controls{}},
		"discord": {delivery.Delivery{ID: "d", Target: binding.ConversationRef{Channel: "discord", ConversationID: "1"}}, delivery.Controls{}},
		"no room": {delivery.Delivery{ID: "d", Target: binding.ConversationRef{Channel: "matrix", ConversationID: "$root"}}, delivery.Controls{}},
	} {
		if _, err := liveMessage(tc.d, tc.c); !errors.Is(err, delivery.ErrRejected) {
			t.Errorf("%s: err = %v, want ErrRejected", name, err)
		}
	}
}
