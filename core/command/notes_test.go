package command

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/notes"
)

// fakeNotes answers with its notes and records what was asked.
type fakeNotes struct {
	off   bool
	ns    []notes.Note
	err   error
	calls []string
}

func (f *fakeNotes) On() bool { return !f.off }

func (f *fakeNotes) InScope(_ context.Context, userID string, conv binding.ConversationRef, public bool) ([]notes.Note, error) {
	f.calls = append(f.calls, "list:"+userID+":"+conv.ConversationID+":"+map[bool]string{true: "public", false: "private"}[public])
	return f.ns, f.err
}

func (f *fakeNotes) Forget(_ context.Context, actor authz.Actor, id string) (notes.Note, error) {
	f.calls = append(f.calls, "forget:"+actor.UserID+":"+actor.Where.ConversationID+":"+id)
	return notes.Note{ID: id}, f.err
}

// TestMemoryNotes: /memory list and /memory forget are the notes' own
// rules with the caller's authority, answered to the caller alone; where
// replies are public the listing asks for the public view.
func TestMemoryNotes(t *testing.T) {
	public := matrixWords
	public.PublicReplies = true
	two := []notes.Note{{ID: "abcd2345", Scope: notes.ScopeMe, Text: "tea"}, {ID: "efgh6789", Scope: notes.ScopeServer, Text: "kiwi"}}
	for _, tc := range []struct {
		name, sub, id string
		n             *fakeNotes
		p             Platform
		want, called  string
	}{
		{name: "list", sub: "list", n: &fakeNotes{ns: two}, p: discordWords,
			want: "📝 2 notes in scope here (newest first; /memory forget <id> deletes one):\n• `abcd2345` (me) tea\n• `efgh6789` (server) kiwi", called: "list:u1:chan-1:private"},
		{name: "list public", sub: "list", n: &fakeNotes{}, p: public,
			want: "📝 No notes in scope here. The agent writes one when asked to remember something.", called: "list:u1:chan-1:public"},
		{name: "forget", sub: "forget", id: " abcd2345 ", n: &fakeNotes{}, p: discordWords,
			want: "🗑️ Forgot note `abcd2345`: its message was deleted.", called: "forget:u1:chan-1:abcd2345"},
		{name: "forget refused", sub: "forget", id: "x", n: &fakeNotes{err: &authz.Refusal{Msg: "there is no note \"x\" that you may forget"}}, p: discordWords,
			want: "ERR There is no note \"x\" that you may forget.", called: "forget:u1:chan-1:x"},
		{name: "forget without id", sub: "forget", n: &fakeNotes{}, p: discordWords, want: "ERR Say which note: /memory forget <id> (/memory list shows the ids)."},
		{name: "off", sub: "list", n: &fakeNotes{off: true}, p: discordWords, want: "ERR Notes are off here (memory.enabled and memory.notes in the bot's config)."},
		{name: "off at start", sub: "forget", id: "x", p: discordWords, want: "ERR Notes are off here (memory.enabled and memory.notes in the bot's config)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Deps{}
			if tc.n != nil {
				d.Notes = tc.n
			}
			r, err := New(Options{}, d).Run(t.Context(), Invocation{Platform: tc.p, Conversation: channel, UserID: "u1", Name: "memory", Sub: tc.sub,
				Options: map[string]any{"id": tc.id}})
			if got := outcome(r, err); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
			if r.Public {
				t.Error("a /memory reply is public")
			}
			if tc.n != nil && strings.Join(tc.n.calls, ",") != tc.called {
				t.Errorf("asked %v, want %s", tc.n.calls, tc.called)
			}
		})
	}
}
