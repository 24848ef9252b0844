package matrix

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The sync token persists across a restart of the client: what arrived while it was down is handled on the next
// start, nothing is handled twice, and the very first start does not replay the room's history.
func TestSyncTokenResumesAfterRestart(t *testing.T) {
	e := newEnv(t)
	history := e.say(t, text("before the bot ever ran"))
	e.waitVisible(t, history) // history: in the server's view before the bot's first sync

	store := &savingStore{TokenStore: NewFileTokenStore(filepath.Join(t.TempDir(), "sync-token")), saved: make(chan string, 1)}
	rec := newRecorder()
	first := run(t, e.sync(t, e.client(t), store, rec.handle))
	store.waitSave(t) // the initial sync is done: from here on, everything is new
	m1, m2 := e.say(t, text("one")), e.say(t, text("two"))
	rec.wait(t, m1)
	rec.wait(t, m2)
	first.stop(t)

	// Down: three events arrive, one in a thread.
	m3, m4 := e.say(t, text("three")), e.say(t, text("four"))
	m5 := e.say(t, map[string]any{"msgtype": "m.text", "body": "five", "m.mentions": map[string]any{},
		"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": m1, "is_falling_back": true, "m.in_reply_to": map[string]any{"event_id": m1}}})

	second := run(t, e.sync(t, e.client(t), store, rec.handle)) // a new process: the same token file, nothing else
	rec.wait(t, m3)
	rec.wait(t, m4)
	if in := rec.wait(t, m5); in.ThreadRoot != m1 {
		t.Errorf("m5 thread root = %q, want %q", in.ThreadRoot, m1)
	}
	m6 := e.say(t, text("six")) // after catch-up: proves the second client got past its first batch
	rec.wait(t, m6)
	second.stop(t)

	got := rec.all()
	if n := count(got, history); n != 0 {
		t.Errorf("history event handled %d times; the first start must skip it", n)
	}
	order := []string{m1, m2, m3, m4, m5, m6}
	var seen []string
	for _, in := range got {
		seen = append(seen, in.EventID)
	}
	for _, ev := range order {
		if n := count(got, ev); n != 1 {
			t.Errorf("event %s handled %d times, want once (handled in order: %v)", ev, n, seen)
		}
	}
	if len(seen) != len(order) {
		t.Fatalf("handled %v, want %v", seen, order)
	}
	// Each conversation's events in order (the room's; m5 is the thread's): conversations run on their own lanes.
	room := slices.DeleteFunc(slices.Clone(seen), func(ev string) bool { return ev == m5 })
	if want := []string{m1, m2, m3, m4, m6}; !slices.Equal(room, want) {
		t.Fatalf("the room's events handled in order %v, want %v", room, want)
	}
}

// A token that cannot be saved stops the loop with an error (the position would be lost otherwise), and the
// next start hands that batch again: at-least-once, never lost.
func TestSyncTokenSaveFailureLosesNothing(t *testing.T) {
	e := newEnv(t)
	mem := &MemoryTokenStore{}
	store := &savingStore{TokenStore: mem, saved: make(chan string, 1)}
	rec := newRecorder()
	failing := &failingStore{TokenStore: store}
	s := e.sync(t, e.client(t), failing, rec.handle)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	store.waitSave(t)
	before := len(rec.all())
	failing.fail.Store(true)
	m1 := e.say(t, text("one"))
	// Run stops at the first batch whose save fails: m1's, or an earlier
	// (quiet) batch that came in first.
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Run = %v, want the save error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run went on after a failed save")
	}
	failed := rec.all()[before:] // what the batch whose save failed handed
	run(t, e.sync(t, e.client(t), mem, rec.handle))
	m2 := e.say(t, text("two"))
	rec.wait(t, m2)
	all := rec.all()
	for _, in := range failed {
		if n := count(all, in.EventID); n != 2 {
			t.Errorf("%s handled %d times, want twice (handed again after the failed save)", in.EventID, n)
		}
	}
	if n := count(all, m1); n < 1 || n > 2 {
		t.Fatalf("m1 handled %d times, want once, or twice if its batch's save failed", n)
	}
}

// failingStore fails every save while fail is set.
type failingStore struct {
	TokenStore
	fail atomic.Bool
}

func (f *failingStore) SaveSyncToken(ctx context.Context, tok string) error {
	if f.fail.Load() {
		return errors.New("disk full")
	}
	return f.TokenStore.SaveSyncToken(ctx, tok)
}

// A downtime with more events than one /sync timeline holds: the gap is filled from /messages, so every event is
// handled once, in order.
func TestSyncCatchUpBeyondTimelineLimit(t *testing.T) {
	e := newEnv(t)
	store := &savingStore{TokenStore: &MemoryTokenStore{}, saved: make(chan string, 1)}
	small := func(o *SyncOptions) { o.TimelineLimit = 2 }
	rec := newRecorder()
	first := run(t, e.sync(t, e.client(t), store, rec.handle, small))
	store.waitSave(t)
	first.stop(t)
	var want []string
	for i := range 9 {
		want = append(want, e.say(t, text(fmt.Sprintf("while down %d", i))))
	}
	run(t, e.sync(t, e.client(t), store, rec.handle, small))
	rec.wait(t, want[len(want)-1])
	last := e.say(t, text("after"))
	rec.wait(t, last)
	want = append(want, last)
	var got []string
	for _, in := range rec.all() {
		got = append(got, in.EventID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("handled %v\nwant    %v", got, want)
	}
}

// Mentions come from m.mentions only (the body is read only for clients without it); the bot's own and its
// ghosts' messages are never inbound; threads, edits and redactions are classified.
func TestInboundClassificationAgainstDendrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store := &savingStore{TokenStore: &MemoryTokenStore{}, saved: make(chan string, 1)}
	c := e.client(t)
	rec := newRecorder()
	run(t, e.sync(t, c, store, rec.handle))
	store.waitSave(t)

	mention := e.say(t, map[string]any{"msgtype": "m.text", "body": "bot: please look", "m.mentions": map[string]any{"user_ids": []string{e.bot.UserID}}})
	bodyOnly := e.say(t, map[string]any{"msgtype": "m.text", "body": "I talked to " + e.bot.UserID + " yesterday", "m.mentions": map[string]any{}})
	legacy := e.say(t, map[string]any{"msgtype": "m.text", "body": e.bot.UserID + ": hi"})
	room := e.say(t, map[string]any{"msgtype": "m.text", "body": "@room hello", "m.mentions": map[string]any{"room": true}})
	inThread := e.say(t, map[string]any{"msgtype": "m.text", "body": "in thread", "m.mentions": map[string]any{},
		"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": mention, "is_falling_back": true, "m.in_reply_to": map[string]any{"event_id": mention}}})
	edit := e.say(t, map[string]any{"msgtype": "m.text", "body": "* fixed", "m.mentions": map[string]any{},
		"m.new_content": map[string]any{"msgtype": "m.text", "body": "fixed"},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": bodyOnly}})
	red, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(legacy))
	if err != nil {
		t.Fatal(err)
	}
	// Not inbound: the bot's own message, a persona ghost's, a notice.
	own, err := c.Send(ctx, Message{DeliveryID: "own-1", RoomID: e.room, Text: "bot speaking"})
	if err != nil {
		t.Fatal(err)
	}
	ghostRc, err := c.Send(ctx, Message{DeliveryID: "ghost-1", RoomID: e.room, Text: "persona speaking", Persona: Persona{Name: "Researcher"}})
	if err != nil {
		t.Fatal(err)
	}
	notice := e.say(t, map[string]any{"msgtype": "m.notice", "body": "another bot", "m.mentions": map[string]any{"user_ids": []string{e.bot.UserID}}})
	last := e.say(t, text("last")) // sync order: once it is handled, everything before it was

	rec.wait(t, last)
	check := func(name, evID string, want func(Inbound) bool) {
		t.Helper()
		in := rec.wait(t, evID)
		if in.RoomID != e.room || in.Sender != e.alice.UserID || !want(in) {
			t.Errorf("%s: got %+v", name, in)
		}
	}
	check("mention", mention, func(in Inbound) bool { return in.Kind == KindMessage && in.MentionsBot })
	check("id in body, empty m.mentions", bodyOnly, func(in Inbound) bool { return in.Kind == KindMessage && !in.MentionsBot })
	check("legacy without m.mentions", legacy, func(in Inbound) bool { return in.MentionsBot })
	check("@room", room, func(in Inbound) bool { return in.MentionsRoom && !in.MentionsBot })
	check("thread", inThread, func(in Inbound) bool { return in.ThreadRoot == mention && in.ReplyTo == "" && !in.MentionsBot })
	check("edit", edit, func(in Inbound) bool { return in.Kind == KindEdit && in.Edits == bodyOnly && in.Body == "fixed" })
	check("redaction", red.EventID.String(), func(in Inbound) bool { return in.Kind == KindRedaction && in.Redacts == legacy })
	for name, evID := range map[string]string{"own": own.EventIDs[0], "ghost": ghostRc.EventIDs[0], "notice": notice} {
		if n := count(rec.all(), evID); n != 0 {
			t.Errorf("%s message handled %d times, want never", name, n)
		}
	}
	ghostEv := e.event(t, ghostRc.EventIDs[0])
	if ghostEv["sender"] != "@agentbot_researcher:localhost" {
		t.Errorf("ghost message sender = %v", ghostEv["sender"])
	}
	_ = event.EventMessage
}
