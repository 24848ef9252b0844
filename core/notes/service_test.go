package notes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/store/memory"
)

// chat is a strict fake of the platform, the send owner and the
// transcript's deletion path together: a message exists until deleted;
// deleting a message the chat does not show is an error; the deletion
// path runs the erasers, as transcript.Service.Delete does.
type chat struct {
	n       int
	shown   map[string]string // message id -> text
	conv    map[string]binding.ConversationRef
	deleted map[string]bool
	erasers []transcript.Eraser
	redact  func(string) string
}

func newChat() *chat {
	return &chat{shown: map[string]string{}, conv: map[string]binding.ConversationRef{}, deleted: map[string]bool{}}
}

func (c *chat) Deliver(_ context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error) {
	if commit != nil || d.ID == "" || !d.Target.Valid() || d.Producer.Source != transcript.SourceNote {
		return delivery.Result{}, fmt.Errorf("fake: unexpected delivery %+v", d)
	}
	c.n++
	id := fmt.Sprintf("m%d", c.n)
	text := d.Text
	if c.redact != nil {
		text = c.redact(text)
	}
	c.shown[id], c.conv[id] = text, d.Target
	return delivery.Result{MessageIDs: []string{id}, SessionKey: "k", Written: true, Entry: transcript.Entry{Text: text, MessageIDs: []string{id}}}, nil
}

func (c *chat) DeleteMessage(_ context.Context, conv binding.ConversationRef, id string) error {
	if _, ok := c.shown[id]; !ok {
		return fmt.Errorf("fake: delete of message %s that is not shown", id)
	}
	if c.conv[id].Key() != conv.Key() {
		return fmt.Errorf("fake: message %s is in %s, not %s", id, c.conv[id].ConversationID, conv.ConversationID)
	}
	delete(c.shown, id)
	return nil
}

// Delete is the deletion path: the entry of a deleted message is erased.
func (c *chat) Delete(ctx context.Context, id string) (bool, error) {
	if _, ok := c.conv[id]; !ok {
		return false, nil
	}
	c.deleted[id] = true
	for _, e := range c.erasers {
		if err := e.EraseEntry(ctx, transcript.Entry{MessageIDs: []string{id}, Deleted: true}); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (c *chat) Locate(_ context.Context, id string) (string, transcript.Entry, bool, error) {
	if _, ok := c.conv[id]; !ok {
		return "", transcript.Entry{}, false, nil
	}
	return "k", transcript.Entry{MessageIDs: []string{id}, Deleted: c.deleted[id]}, true, nil
}

// ops: operators by "user/guild"; places: conversation id -> guild.
type world struct {
	ops    map[string]bool
	places map[string]string
}

func (w world) Operator(_ context.Context, actor authz.Actor, target binding.ConversationRef) bool {
	return !authz.IsDM(target) && w.ops[actor.UserID+"/"+w.places[target.ConversationID]]
}

func (w world) Place(_ context.Context, conv binding.ConversationRef) (string, error) {
	return w.places[conv.ConversationID], nil
}

func ref(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

type fixture struct {
	svc  *notes.Service
	chat *chat
	st   *memory.Notes
	on   *atomic.Bool
}

func setup(t *testing.T, o notes.Options) fixture {
	t.Helper()
	f := fixture{chat: newChat(), st: memory.NewNotes(), on: &atomic.Bool{}}
	f.on.Store(true)
	w := world{ops: map[string]bool{"olga/g1": true}, places: map[string]string{"c1": "g1", "c2": "g1", "c3": "g2"}}
	ids := 0
	f.svc = notes.New(o, notes.Deps{Store: f.st, Poster: f.chat, Deleter: f.chat, Changes: f.chat, Authority: w, Places: w,
		On: f.on.Load, Clock: clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)), Log: zerolog.Nop(),
		NewID: func() string { ids++; return fmt.Sprintf("id%06d", ids) }})
	f.chat.erasers = []transcript.Eraser{f.svc}
	return f
}

func actor(user, conv string) authz.Actor { return authz.Actor{UserID: user, Where: ref(conv)} }

func isRefusal(err error, want string) bool {
	var r *authz.Refusal
	return errors.As(err, &r) && strings.Contains(r.Msg, want)
}

func TestRememberScopesAndRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, user, conv, text string
		scope                  notes.Scope
		refused                string // "" = accepted
	}{
		{"me", "alice", "c1", "likes tea", notes.ScopeMe, ""},
		{"here", "alice", "c1", "metric", notes.ScopeHere, ""},
		{"server by an operator", "olga", "c1", "motto", notes.ScopeServer, ""},
		{"server by a member", "bob", "c1", "motto", notes.ScopeServer, "only an operator"},
		{"server by an operator of another server", "olga", "c3", "motto", notes.ScopeServer, "only an operator"},
		{"server in a DM", "olga", "user:olga", "motto", notes.ScopeServer, "belongs to no server"},
		{"empty", "alice", "c1", "  ", notes.ScopeHere, "empty"},
		{"too long", "alice", "c1", strings.Repeat("é", 501), notes.ScopeHere, "the limit is 500"},
		{"unknown scope", "alice", "c1", "x", notes.Scope("world"), "write me"},
		{"no user", "", "c1", "x", notes.ScopeHere, "no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, notes.Options{})
			n, err := f.svc.Remember(ctx, actor(tc.user, tc.conv), "main", tc.text, tc.scope)
			if tc.refused != "" {
				if !isRefusal(err, tc.refused) || len(f.chat.shown) != 0 {
					t.Fatalf("err = %v, shown %v; want a refusal %q and nothing posted", err, f.chat.shown, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := notes.Display(tc.scope, tc.text, n.ID)
			if got := f.chat.shown[n.MessageIDs[0]]; got != want {
				t.Fatalf("displayed %q, want %q", got, want)
			}
			got, ok, _ := f.st.Note(ctx, n.ID)
			if !ok || got.Text != tc.text || got.Author != tc.user || (tc.scope == notes.ScopeMe) != (got.About == tc.user) ||
				(tc.scope == notes.ScopeServer) != (got.Server == "g1") {
				t.Fatalf("record %+v", got)
			}
		})
	}
}

// The record holds what the chat shows: a redacted secret never reaches it.
func TestRememberRecordsTheDisplayedText(t *testing.T) {
	f := setup(t, notes.Options{})
	f.chat.redact = func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted]") }
	n, err := f.svc.Remember(context.Background(), actor("alice", "c1"), "main", "the password is hunter2", notes.ScopeMe)
	if err != nil {
		t.Fatal(err)
	}
	if n.Text != "the password is [redacted]" {
		t.Fatalf("recorded %q", n.Text)
	}
}

func TestInScope(t *testing.T) {
	ctx := context.Background()
	f := setup(t, notes.Options{})
	me, _ := f.svc.Remember(ctx, actor("alice", "c1"), "main", "alice tea", notes.ScopeMe)
	here, _ := f.svc.Remember(ctx, actor("bob", "c1"), "main", "c1 metric", notes.ScopeHere)
	server, _ := f.svc.Remember(ctx, actor("olga", "c2"), "main", "g1 kiwi", notes.ScopeServer)
	dm, _ := f.svc.Remember(ctx, actor("alice", "user:alice"), "main", "alice dm", notes.ScopeMe)
	for _, tc := range []struct {
		name, user, conv string
		public           bool
		want             []string
	}{
		{"alice in c1", "alice", "c1", false, []string{dm.ID, server.ID, here.ID, me.ID}},
		{"alice in c2", "alice", "c2", false, []string{dm.ID, server.ID, me.ID}},
		{"bob in c1", "bob", "c1", false, []string{server.ID, here.ID}},
		{"bob in another server", "bob", "c3", false, nil},
		{"alice in her DM: no server notes", "alice", "user:alice", false, []string{dm.ID, me.ID}},
		{"alice in c1, public", "alice", "c1", true, []string{server.ID, here.ID, me.ID}},
	} {
		ns, err := f.svc.InScope(ctx, tc.user, ref(tc.conv), tc.public)
		var got []string
		for _, n := range ns {
			got = append(got, n.ID)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestForget(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, writer, conv string
		scope              notes.Scope
		by, byConv         string
		ok                 bool
	}{
		{"its author", "alice", "c1", notes.ScopeHere, "alice", "c2", true},
		{"an operator of its server", "alice", "c1", notes.ScopeMe, "olga", "c3", true},
		{"a stranger", "alice", "c1", notes.ScopeHere, "bob", "c1", false},
		{"an operator, in a DM", "alice", "user:alice", notes.ScopeMe, "olga", "c1", false},
		{"its user, in a DM", "alice", "user:alice", notes.ScopeMe, "alice", "c1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, notes.Options{})
			n, err := f.svc.Remember(ctx, actor(tc.writer, tc.conv), "main", "x", tc.scope)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.svc.Forget(ctx, actor(tc.by, tc.byConv), strings.ToUpper(n.ID))
			_, kept, _ := f.st.Note(ctx, n.ID)
			_, shown := f.chat.shown[n.MessageIDs[0]]
			if tc.ok && (err != nil || kept || shown || !f.chat.deleted[n.MessageIDs[0]]) {
				t.Fatalf("err %v, kept %v, shown %v; want forgotten, its message deleted", err, kept, shown)
			}
			if !tc.ok && (!isRefusal(err, "no note") || !kept || !shown) {
				t.Fatalf("err %v, kept %v, shown %v; want a refusal and the note kept", err, kept, shown)
			}
		})
	}
	f := setup(t, notes.Options{})
	if _, err := f.svc.Forget(ctx, actor("alice", "c1"), "nosuchid"); !isRefusal(err, "no note") {
		t.Fatalf("forget of an unknown id: %v", err)
	}
}

// A deleted message (by anyone) forgets its note through the deletion path.
func TestDeletionForgets(t *testing.T) {
	ctx := context.Background()
	f := setup(t, notes.Options{})
	n, _ := f.svc.Remember(ctx, actor("alice", "c1"), "main", "gone soon", notes.ScopeHere)
	if _, err := f.chat.Delete(ctx, n.MessageIDs[0]); err != nil {
		t.Fatal(err)
	}
	if _, kept, _ := f.st.Note(ctx, n.ID); kept {
		t.Fatal("the note of a deleted message is kept")
	}
	if p := f.svc.Prompt(ctx, "alice", ref("c1")); strings.Contains(p, "gone soon") {
		t.Fatalf("prompt holds a forgotten note: %q", p)
	}
}

func TestPromptBudgetAndOff(t *testing.T) {
	ctx := context.Background()
	f := setup(t, notes.Options{PromptBytes: 60})
	for i := range 4 {
		if _, err := f.svc.Remember(ctx, actor("alice", "c1"), "main", fmt.Sprintf("note number %d", i), notes.ScopeHere); err != nil {
			t.Fatal(err)
		}
	}
	p := f.svc.Prompt(ctx, "alice", ref("c1"))
	// Each line is "\n- [id000001] (here) note number N": 34 bytes; one fits in 60.
	if !strings.Contains(p, "note number 3") || strings.Contains(p, "note number 2") || !strings.Contains(p, "3 older notes are not shown") {
		t.Fatalf("prompt with a 60-byte budget:\n%s", p)
	}
	f.on.Store(false)
	if p := f.svc.Prompt(ctx, "alice", ref("c1")); p != "" {
		t.Fatalf("notes off, prompt %q", p)
	}
	if _, err := f.svc.Remember(ctx, actor("alice", "c1"), "main", "x", notes.ScopeHere); !isRefusal(err, "turned off") {
		t.Fatalf("notes off, remember: %v", err)
	}
	tools := notes.Tools{Notes: f.svc}.Tools(ctx, "main", actor("alice", "c1"))
	if len(tools) != 0 {
		t.Fatalf("notes off, offered %v", tools)
	}
	if _, err := (notes.Tools{Notes: f.svc}).Call(ctx, "main", actor("alice", "c1"), model.ToolCall{Name: notes.ToolForget, Arguments: `{"id": "id000001"}`}); !isRefusal(err, "turned off") {
		t.Fatalf("notes off, forget: %v", err)
	}
}
