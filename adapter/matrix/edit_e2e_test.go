package matrix

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// Edits (for streaming) replace a message's text with m.replace, neutralised like sends, by the same poster (a
// persona's ghost edits its own message); a text that cannot fit one edit is refused before anything is sent.
func TestEditForStreaming(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	for _, p := range []Persona{{}, {Name: "Researcher"}} {
		rc, err := c.Send(ctx, Message{DeliveryID: "e-" + p.Name, RoomID: e.room, Text: "draft…", Persona: p})
		if err != nil {
			t.Fatal(err)
		}
		final := strings.Repeat("final words ", 3500) + "@room" // 42 KB: the fallback body must be shortened
		editID, err := c.Edit(ctx, e.room, rc.EventIDs[0], final, "edit-1-"+p.Name, p)
		if err != nil {
			t.Fatalf("edit (persona %q): %v", p.Name, err)
		}
		ed := e.event(t, editID)
		if want := e.event(t, rc.EventIDs[0])["sender"]; ed["sender"] != want {
			t.Errorf("edit by %v, message by %v", ed["sender"], want)
		}
		content := ed["content"].(map[string]any)
		nc, _ := content["m.new_content"].(map[string]any)
		rel, _ := content["m.relates_to"].(map[string]any)
		if rel["rel_type"] != "m.replace" || rel["event_id"] != rc.EventIDs[0] || nc["body"] != Defuse(final) {
			t.Fatalf("edit (persona %q) content: relates %v, new body ok=%v", p.Name, rel, nc["body"] == Defuse(final))
		}
		for _, m := range []any{content["m.mentions"], nc["m.mentions"]} {
			if mm, ok := m.(map[string]any); !ok || len(mm) != 0 {
				t.Errorf("edit m.mentions = %#v, want {}", m)
			}
		}
		if strings.Contains(content["body"].(string), "@room") {
			t.Error("edit fallback body carries @room")
		}
	}
	rc, err := c.Send(ctx, Message{DeliveryID: "e-big", RoomID: e.room, Text: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Edit(ctx, e.room, rc.EventIDs[0], strings.Repeat("x", MaxContentBytes), "edit-big", Persona{})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("oversized edit: err = %v, want ErrRejected", err)
	}
}

// Typing shows and clears the bot's typing notice (seen in alice's /sync).
func TestTyping(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	typing := func() bool {
		resp, err := e.ali.SyncRequest(ctx, 0, "", "", false, "")
		if err != nil {
			t.Fatal(err)
		}
		room := resp.Rooms.Join[id.RoomID(e.room)]
		if room == nil {
			return false
		}
		for _, ev := range room.Ephemeral.Events {
			if ev.Type.Type == "m.typing" && strings.Contains(string(ev.Content.VeryRaw), e.bot.UserID) {
				return true
			}
		}
		return false
	}
	waitFor := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		for typing() != want {
			if time.Now().After(deadline) {
				t.Fatalf("typing never became %v", want)
			}
			<-time.After(20 * time.Millisecond) // polling alice's view
		}
	}
	if err := c.Typing(ctx, e.room, true, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(true)
	if err := c.Typing(ctx, e.room, false, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(false)
}

// Without an appservice a persona posts as the bot with its name in front (the documented fallback).
func TestPersonaFallbackWithoutAppservice(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, func(cfg *Options) { cfg.AppService = nil })
	rc, err := c.Send(ctx, Message{DeliveryID: "f1", RoomID: e.room, Text: "found it", Persona: Persona{Name: "Researcher"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := e.event(t, rc.EventIDs[0])
	if ev["sender"] != e.bot.UserID || ev["content"].(map[string]any)["body"] != "Researcher: found it" || rc.Text != "Researcher: found it" {
		t.Fatalf("fallback post: sender %v body %v", ev["sender"], ev["content"].(map[string]any)["body"])
	}
}
