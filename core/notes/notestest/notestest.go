// Package notestest is the notes.Store conformance suite: one set of cases
// run against store/memory, store/bolt and store/postgres.
package notestest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/internal/storetest"
)

// Option configures Run.
type Option = storetest.Option[notes.Store]

type harness = storetest.Harness[notes.Store]

// WithReopen supplies a hook that closes s and returns a store over the
// same persisted data. Without it, the durability case is skipped.
func WithReopen(fn func(t *testing.T, s notes.Store) notes.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the suite. open must return a new, empty store for each call
// and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) notes.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[notes.Store]{
		{Name: "Empty", Fn: testEmpty},
		{Name: "PutGetReplace", Fn: testPutGetReplace},
		{Name: "FilterByScope", Fn: testFilter},
		{Name: "Delete", Fn: testDelete},
		{Name: "DeleteByMessage", Fn: testDeleteByMessage},
		{Name: "Concurrent", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2026, 6, 7, 8, 9, 10, 111222000, time.UTC)

func conv(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

// note is note i of scope in conversation c.
func note(i int, scope notes.Scope, c string) notes.Note {
	n := notes.Note{ID: fmt.Sprintf("n%02d", i), Scope: scope, Text: fmt.Sprintf("text %d ünïcode", i), Author: "u1",
		Conversation: conv(c), SessionKey: "agent:main:discord:channel:" + c,
		MessageIDs: []string{fmt.Sprintf("m%d", i)}, At: t0.Add(time.Duration(i) * time.Minute)}
	switch scope {
	case notes.ScopeMe:
		n.About = "u1"
	case notes.ScopeServer:
		n.Server = "g1"
	}
	return n
}

func put(t *testing.T, h *harness, s notes.Store, ns ...notes.Note) {
	t.Helper()
	for _, n := range ns {
		if err := s.PutNote(h.Ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

func list(t *testing.T, h *harness, s notes.Store, f notes.Filter) []notes.Note {
	t.Helper()
	ns, err := s.Notes(h.Ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func ids(ns []notes.Note) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

func testEmpty(t *testing.T, h *harness) {
	s := h.Open(t)
	if ns := list(t, h, s, notes.Filter{}); len(ns) != 0 {
		t.Fatalf("new store lists %v", ns)
	}
	if _, ok, err := s.Note(h.Ctx, "n01"); ok || err != nil {
		t.Fatalf("Note on an empty store: %v %v", ok, err)
	}
	if ok, err := s.DeleteNote(h.Ctx, "n01"); ok || err != nil {
		t.Fatalf("DeleteNote on an empty store: %v %v", ok, err)
	}
	if gone, err := s.DeleteNotesByMessage(h.Ctx, "m1"); len(gone) != 0 || err != nil {
		t.Fatalf("DeleteNotesByMessage on an empty store: %v %v", gone, err)
	}
}

func testPutGetReplace(t *testing.T, h *harness) {
	s := h.Open(t)
	n := note(1, notes.ScopeMe, "c1")
	put(t, h, s, n)
	got, ok, err := s.Note(h.Ctx, n.ID)
	if err != nil || !ok || !reflect.DeepEqual(got, n) {
		t.Fatalf("Note = %+v %v %v, want %+v", got, ok, err, n)
	}
	n.Text, n.MessageIDs = "replaced", []string{"m1", "m1b"}
	put(t, h, s, n)
	if got, _, _ := s.Note(h.Ctx, n.ID); !reflect.DeepEqual(got, n) {
		t.Fatalf("after replace: %+v, want %+v", got, n)
	}
	if all := list(t, h, s, notes.Filter{}); len(all) != 1 {
		t.Fatalf("a replaced note is listed %d times", len(all))
	}
}

func testFilter(t *testing.T, h *harness) {
	s := h.Open(t)
	me, here, server := note(3, notes.ScopeMe, "c1"), note(1, notes.ScopeHere, "c1"), note(2, notes.ScopeServer, "c2")
	other := note(4, notes.ScopeMe, "c1")
	other.About, other.Author = "u2", "u2"
	hereElse := note(5, notes.ScopeHere, "c2")
	otherServer := note(6, notes.ScopeServer, "c3")
	otherServer.Server = "g2"
	put(t, h, s, otherServer, hereElse, other, server, here, me) // not in time order
	for _, tt := range []struct {
		name string
		f    notes.Filter
		want []string
	}{
		{"all, oldest first", notes.Filter{}, []string{"n01", "n02", "n03", "n04", "n05", "n06"}},
		{"about u1", notes.Filter{About: "u1"}, []string{"n03"}},
		{"here c1", notes.Filter{Conversation: conv("c1").Key()}, []string{"n01"}},
		{"server g1", notes.Filter{Server: "g1"}, []string{"n02"}},
		{"in scope of u1 in c1 of g1", notes.Filter{About: "u1", Conversation: conv("c1").Key(), Server: "g1"}, []string{"n01", "n02", "n03"}},
		{"a server's here note is not its server note", notes.Filter{Server: "c2"}, []string{}},
		{"nobody", notes.Filter{About: "u9"}, []string{}},
	} {
		if got := ids(list(t, h, s, tt.f)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func testDelete(t *testing.T, h *harness) {
	s := h.Open(t)
	put(t, h, s, note(1, notes.ScopeHere, "c1"), note(2, notes.ScopeHere, "c1"))
	if ok, err := s.DeleteNote(h.Ctx, "n01"); !ok || err != nil {
		t.Fatalf("DeleteNote = %v %v", ok, err)
	}
	if ok, err := s.DeleteNote(h.Ctx, "n01"); ok || err != nil {
		t.Fatalf("second DeleteNote = %v %v", ok, err)
	}
	if got := ids(list(t, h, s, notes.Filter{})); !reflect.DeepEqual(got, []string{"n02"}) {
		t.Fatalf("left %v", got)
	}
	// The message index follows: the deleted note's message names nothing.
	if gone, err := s.DeleteNotesByMessage(h.Ctx, "m1"); len(gone) != 0 || err != nil {
		t.Fatalf("by message after delete: %v %v", gone, err)
	}
}

func testDeleteByMessage(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b := note(1, notes.ScopeHere, "c1"), note(2, notes.ScopeMe, "c1")
	a.MessageIDs = []string{"m1", "m1b"} // a split message: either part names it
	put(t, h, s, a, b)
	gone, err := s.DeleteNotesByMessage(h.Ctx, "m1b")
	if err != nil || !reflect.DeepEqual(ids(gone), []string{"n01"}) {
		t.Fatalf("DeleteNotesByMessage(m1b) = %v %v", ids(gone), err)
	}
	if _, ok, _ := s.Note(h.Ctx, "n01"); ok {
		t.Fatal("note n01 still there")
	}
	if gone, err := s.DeleteNotesByMessage(h.Ctx, "m1"); len(gone) != 0 || err != nil {
		t.Fatalf("replay: %v %v", gone, err)
	}
	if got := ids(list(t, h, s, notes.Filter{})); !reflect.DeepEqual(got, []string{"n02"}) {
		t.Fatalf("left %v", got)
	}
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.PutNote(h.Ctx, note(i, notes.ScopeHere, "c1")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := list(t, h, s, notes.Filter{Conversation: conv("c1").Key()}); len(got) != 16 {
		t.Fatalf("got %d notes, want 16", len(got))
	}
}

func testDurable(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b := note(1, notes.ScopeServer, "c1"), note(2, notes.ScopeMe, "c1")
	put(t, h, s, a, b)
	if _, err := s.DeleteNote(h.Ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	if got := list(t, h, s, notes.Filter{}); !reflect.DeepEqual(got, []notes.Note{a}) {
		t.Fatalf("after reopen: %+v, want %+v", got, a)
	}
}
