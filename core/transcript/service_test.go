package transcript_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

func newService() *transcript.Service {
	return transcript.New(transcript.Options{}, transcript.Deps{Store: memory.New(), Clock: clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))})
}

func TestAppendIdempotentOnDeliveryID(t *testing.T) {
	s := newService()
	ctx := context.Background()
	tests := []struct {
		name     string
		e        transcript.Entry
		wantSeq  uint64
		conflict bool
	}{
		{"first", transcript.Entry{Role: transcript.RoleAssistant, Text: "hello", DeliveryID: "d1"}, 1, false},
		{"same id same text", transcript.Entry{Role: transcript.RoleAssistant, Text: "hello", DeliveryID: "d1"}, 1, false},
		{"same id other text", transcript.Entry{Role: transcript.RoleAssistant, Text: "bye", DeliveryID: "d1"}, 1, true},
		{"no id never dedupes", transcript.Entry{Role: transcript.RoleUser, Text: "hello"}, 2, false},
		{"no id again", transcript.Entry{Role: transcript.RoleUser, Text: "hello"}, 3, false},
	}
	for _, tc := range tests {
		got, err := s.Append(ctx, "k", tc.e)
		if tc.conflict != errors.Is(err, transcript.ErrDeliveryConflict) || (!tc.conflict && err != nil) {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
		if got.Seq != tc.wantSeq {
			t.Fatalf("%s: seq %d, want %d", tc.name, got.Seq, tc.wantSeq)
		}
		if got.MessageIDs == nil {
			t.Fatalf("%s: MessageIDs is nil", tc.name)
		}
	}
}

func TestHistoryFollowsGenerations(t *testing.T) {
	s := newService()
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: fmt.Sprint("old", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := s.History(ctx, "k", 3)
	if len(h) != 3 || h[0].Text != "old2" || h[2].Text != "old4" {
		t.Fatalf("history %+v", h)
	}
	gen, err := s.Reset(ctx, "k")
	if err != nil || gen != 1 {
		t.Fatalf("Reset = %d, %v", gen, err)
	}
	if h, _ := s.History(ctx, "k", 10); len(h) != 0 {
		t.Fatalf("history after reset %+v", h)
	}
	e, _ := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleAssistant, Text: "new"})
	if e.Generation != 1 || e.Seq != 6 {
		t.Fatalf("entry after reset %+v", e)
	}
	h, _ = s.History(ctx, "k", 10)
	if len(h) != 1 || h[0].Text != "new" {
		t.Fatalf("history %+v", h)
	}
	all, _ := s.Entries(ctx, "k", 0, 100)
	if len(all) != 6 {
		t.Fatalf("the record lost entries across reset: %d", len(all))
	}
}

type recordingEraser struct{ got []transcript.Entry }

func (r *recordingEraser) EraseEntry(_ context.Context, e transcript.Entry) error {
	r.got = append(r.got, e)
	return nil
}

func texts(es []transcript.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Text)
	}
	return out
}

// TestEditsAndDeletionsInHistory: History shows an edited entry's latest
// text and leaves deleted entries (and the change records) out; a deletion
// erases the entry's text and its edits' texts in the store; replayed
// events write nothing.
func TestEditsAndDeletionsInHistory(t *testing.T) {
	st := memory.New()
	er := &recordingEraser{}
	s := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		Erasers: []transcript.Eraser{er}})
	ctx := context.Background()
	for i, text := range []string{"q1 typo", "a1", "my password is hunter2", "a2"} {
		role := transcript.RoleUser
		if i%2 == 1 {
			role = transcript.RoleAssistant
		}
		if _, err := s.Append(ctx, "k", transcript.Entry{Role: role, Text: text, MessageIDs: []string{fmt.Sprintf("m%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Edit(ctx, "m0", "t1", "q1 fixed"); err != nil || !ok {
		t.Fatalf("Edit: %v %v", ok, err)
	}
	if ok, err := s.Edit(ctx, "m0", "t1", "q1 fixed"); err != nil || ok {
		t.Fatalf("replayed Edit wrote again: %v %v", ok, err)
	}
	if ok, err := s.Edit(ctx, "m2", "t2", "my password is hunter9"); err != nil || !ok {
		t.Fatalf("Edit: %v %v", ok, err)
	}
	// A second edit with the same timestamp is another edit, not a replay.
	if ok, err := s.Edit(ctx, "m2", "t2", "my password is hunter3"); err != nil || !ok {
		t.Fatalf("second Edit with one timestamp: %v %v", ok, err)
	}
	if ok, err := s.Edit(ctx, "nope", "t3", "x"); err != nil || ok {
		t.Fatalf("Edit of an unknown message: %v %v", ok, err)
	}
	h, err := s.History(ctx, "k", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(texts(h)); got != "[q1 fixed a1 my password is hunter3 a2]" {
		t.Fatalf("history after edits = %s", got)
	}
	for _, id := range []string{"m2", "m2", "m3"} { // m2 twice: a replay
		if ok, err := s.Delete(ctx, id); err != nil || !ok {
			t.Fatalf("Delete(%s): %v %v", id, ok, err)
		}
	}
	h, err = s.History(ctx, "k", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(texts(h)); got != "[q1 fixed a1]" {
		t.Fatalf("history after deletions = %s", got)
	}
	// n counts visible entries: the window widens past records and deleted entries.
	if h, err = s.History(ctx, "k", 2); err != nil || fmt.Sprint(texts(h)) != "[q1 fixed a1]" {
		t.Fatalf("History(2) = %v, %v", texts(h), err)
	}
	all, err := s.Entries(ctx, "k", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	deletions := 0
	for _, e := range all {
		if e.Source == transcript.SourceDeletion {
			deletions++
		}
		if strings.Contains(e.Text, "hunter") || e.Text == "a2" {
			t.Fatalf("deleted text survives in entry %d: %+v", e.Seq, e)
		}
	}
	if deletions != 2 {
		t.Fatalf("%d deletion records, want 2 (a replayed delete writes nothing)", deletions)
	}
	if len(er.got) != 3 || er.got[0].Seq != 3 {
		t.Fatalf("erasers saw %+v", er.got)
	}
	if ok, err := s.Edit(ctx, "m2", "t4", "back"); err != nil || ok {
		t.Fatalf("Edit of a deleted message: %v %v", ok, err)
	}
}

// Displayed is what the chat still shows of a session, across generations
// (a /reset leaves the model's history, not the chat): catch-up compares it
// with the channel.
func TestDisplayedSpansGenerations(t *testing.T) {
	s := newService()
	ctx := context.Background()
	add := func(text, id string) {
		t.Helper()
		if _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: text, MessageIDs: []string{id}}); err != nil {
			t.Fatal(err)
		}
	}
	add("old1", "m1")
	add("old2", "m2")
	if _, err := s.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	add("new1", "m3")
	if ok, err := s.Edit(ctx, "m1", "t1", "old1 edited"); err != nil || !ok {
		t.Fatalf("Edit: %v %v", ok, err)
	}
	if ok, err := s.Delete(ctx, "m2"); err != nil || !ok {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	tests := []struct {
		n    int
		want string
	}{
		{10, "[old1 edited new1]"},
		{1, "[new1]"},
		{0, "[]"},
	}
	for _, tt := range tests {
		d, err := s.Displayed(ctx, "k", tt.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(texts(d)); got != tt.want {
			t.Errorf("Displayed(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
	if h, _ := s.History(ctx, "k", 10); fmt.Sprint(texts(h)) != "[new1]" {
		t.Errorf("History = %v, want the current generation only", texts(h))
	}
}

// An edit handed again after later ones (a Matrix /sync rewound past both:
// Matrix soak seed 51) is a replay: the newer text stays, as the chat shows
// it. Each edit's key is its own (a Matrix edit's event id).
func TestReplayedOlderEditKeepsTheNewerText(t *testing.T) {
	st := memory.New()
	s := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))})
	ctx := context.Background()
	if _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: "bot: note 1", MessageIDs: []string{"$m"}}); err != nil {
		t.Fatal(err)
	}
	edits := []struct {
		key, text string
		wrote     bool
	}{
		{"$e1", "never mind 2", true},
		{"$e2", "bot: edited 8", true},
		{"$e1", "never mind 2", false}, // replayed
		{"$e2", "bot: edited 8", false},
	}
	for _, e := range edits {
		if ok, err := s.Edit(ctx, "$m", e.key, e.text); err != nil || ok != e.wrote {
			t.Fatalf("Edit(%s, %q) = %v, %v; want %v", e.key, e.text, ok, err, e.wrote)
		}
	}
	h, err := s.History(ctx, "k", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(texts(h)); got != "[bot: edited 8]" {
		t.Fatalf("history after the replay = %s, want the newer edit", got)
	}
}
