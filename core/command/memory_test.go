package command

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/memory"
)

// fakeMemory answers every search with found and records which was asked.
type fakeMemory struct {
	found []memory.Found
	err   error
	calls []string
}

func (f *fakeMemory) Search(_ context.Context, userID, text string, limit int) ([]memory.Found, error) {
	f.calls = append(f.calls, "all:"+userID+":"+text)
	return f.found, f.err
}

func (f *fakeMemory) SearchIn(_ context.Context, userID string, conv binding.ConversationRef, text string, limit int) ([]memory.Found, error) {
	f.calls = append(f.calls, "in:"+conv.ConversationID+":"+userID+":"+text)
	return f.found, f.err
}

// TestMemorySearch: /memory search is the recall tool's search with the
// caller's authority, ephemeral on Discord; where replies are public
// (Matrix) it searches only the conversation everyone there sees.
func TestMemorySearch(t *testing.T) {
	hit := memory.Found{Hit: memory.Hit{Doc: memory.Doc{Author: "alice", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), MessageID: "m1"}, Snippet: "the deploy key"},
		Conversation: binding.ConversationRef{Channel: "discord", ConversationID: "chan-1"}}
	public := matrixWords
	public.PublicReplies = true
	for _, tc := range []struct {
		name   string
		mem    *fakeMemory
		p      Platform
		sub    string
		want   string
		called string
	}{
		{name: "discord", mem: &fakeMemory{found: []memory.Found{hit}}, p: discordWords, sub: "search",
			want: "🔎 [1] 2026-01-02 03:04:05 UTC · channel:chan-1 · alice: the deploy key (message m1)", called: "all:u1:deploy key"},
		{name: "public replies", mem: &fakeMemory{}, p: public, sub: "search", want: "🔎 Nothing found in this conversation.", called: "in:chan-1:u1:deploy key"},
		{name: "refused", mem: &fakeMemory{err: &authz.Refusal{Msg: "the query is empty: say what to look for"}}, p: discordWords, sub: "search",
			want: "ERR the query is empty: say what to look for", called: "all:u1:deploy key"},
		{name: "turned off", mem: &fakeMemory{err: ErrMemoryOff}, p: discordWords, sub: "search", want: "ERR Memory is off here (memory.enabled in the bot's config).", called: "all:u1:deploy key"},
		{name: "off at start", p: discordWords, sub: "search", want: "ERR Memory is off here (memory.enabled in the bot's config)."},
		{name: "unknown sub", mem: &fakeMemory{}, p: discordWords, sub: "gc", want: "ERR Unknown command /memory gc: use /memory list, search <query> or forget <id>."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Deps{}
			if tc.mem != nil {
				d.Memory = tc.mem
			}
			r, err := New(Options{}, d).Run(t.Context(), Invocation{Platform: tc.p, Conversation: channel, UserID: "u1", Name: "memory", Sub: tc.sub,
				Options: map[string]any{"query": " deploy key "}})
			if got := outcome(r, err); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
			if r.Public {
				t.Error("a /memory reply is public")
			}
			if tc.mem != nil && strings.Join(tc.mem.calls, ",") != tc.called {
				t.Errorf("asked %v, want %s", tc.mem.calls, tc.called)
			}
		})
	}
}
