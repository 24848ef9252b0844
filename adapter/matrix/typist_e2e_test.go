package matrix

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// botTyping reports whether alice's /sync shows the bot typing in room.
func (e *env) botTyping(t *testing.T, room string) bool {
	t.Helper()
	resp, err := e.ali.SyncRequest(context.Background(), 0, "", "", false, "")
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Rooms.Join[id.RoomID(room)]
	if r == nil {
		return false
	}
	for _, ev := range r.Ephemeral.Events {
		if ev.Type.Type == "m.typing" && strings.Contains(string(ev.Content.VeryRaw), e.bot.UserID) {
			return true
		}
	}
	return false
}

// waitTyping waits until the bot's typing in room is want, at most within (a notice lapses by itself after
// TypingTimeout: a wait for its end must be shorter to tell a cleared notice from a lapsed one).
func (e *env) waitTyping(t *testing.T, room string, want bool, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for e.botTyping(t, room) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the bot's typing never became %v", why, want)
		}
		<-time.After(20 * time.Millisecond) // polling alice's view
	}
}

// TestTypist: the core's typing indicator shows in the conversation's room (a thread's is its room's), and the
// bot's next message there ends it, as on Discord (Dendrite keeps it until its timeout otherwise); a conversation
// that is no Matrix room is an error.
func TestTypist(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	ty := NewTypist(c)
	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}

	if err := ty.Typing(ctx, room); err != nil {
		t.Fatal(err)
	}
	e.waitTyping(t, e.room, true, waitTimeout, "typing in the room")
	if _, err := (DeliverySender{Client: c}).Send(ctx, delivery.Delivery{ID: "answer:1", Target: room, Text: "the answer"}); err != nil {
		t.Fatal(err)
	}
	e.waitTyping(t, e.room, false, TypingTimeout/2, "after the answer")

	root, err := c.CreateThread(ctx, e.room, "Task", "typ-root", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	thread := binding.ConversationRef{Channel: "matrix", ConversationID: root, ParentConversationID: e.room}
	if err := ty.Typing(ctx, thread); err != nil {
		t.Fatal(err)
	}
	e.waitTyping(t, e.room, true, waitTimeout, "typing in a thread")
	live, err := (DeliverySender{Client: c}).PostLive(ctx, delivery.Delivery{ID: "turn:2", Target: thread}, 0, "streaming…", delivery.Controls{})
	if err != nil || live == "" {
		t.Fatalf("live post: %q, %v", live, err)
	}
	e.waitTyping(t, e.room, false, TypingTimeout/2, "after a live post into the thread")

	if err := ty.Typing(ctx, binding.ConversationRef{Channel: "matrix", ConversationID: "#alias:localhost"}); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("typing in a non-room: %v, want ErrRejected", err)
	}
	if err := ty.Typing(ctx, binding.ConversationRef{Channel: "matrix", ConversationID: "user:@nobody:localhost"}); !errors.Is(err, delivery.ErrDestinationGone) {
		t.Fatalf("typing in a DM the bot has no room for: %v, want ErrDestinationGone", err)
	}
}
