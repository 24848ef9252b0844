package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/notes"
)

type fakeSearcher struct {
	found []memory.Found
	err   error
	asked []string
}

func (f *fakeSearcher) SearchAll(_ context.Context, text string, limit int) ([]memory.Found, error) {
	f.asked = append(f.asked, text)
	return f.found, f.err
}

// TestMemoryPage: the Memory page is a GET search box; its results link
// to the conversation page; memory off says so; a failed search is an error page.
func TestMemoryPage(t *testing.T) {
	st := openStore(t)
	hit := memory.Found{Hit: memory.Hit{Doc: memory.Doc{Key: "agent:main:discord:channel:c1", Author: "alice", MessageID: "m1",
		At: time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)}, Snippet: "the <deploy> key"}, Conversation: binding.ConversationRef{Channel: "discord", ConversationID: "c1"}}
	s := &fakeSearcher{found: []memory.Found{hit}}
	c := New(Options{Store: st, Now: func() time.Time { return t0 }, Memory: s})

	code, body := get(t, c, http.MethodGet, "/memory")
	if code != http.StatusOK || !strings.Contains(body, `name="q"`) || len(s.asked) != 0 {
		t.Fatalf("GET /memory = %d, asked %v\n%s", code, s.asked, body)
	}
	code, body = get(t, c, http.MethodGet, "/memory?q=deploy+key")
	mustContain(t, "/memory?q", body, "channel:c1", `href="/sessions/agent:main:discord:channel:c1"`, "alice", "the &lt;deploy&gt; key", "m1", "2026-03-10 10:00:00")
	if code != http.StatusOK || strings.Join(s.asked, ",") != "deploy key" {
		t.Fatalf("search = %d, asked %v", code, s.asked)
	}
	s.err = errors.New("index unreadable")
	if code, _ := get(t, c, http.MethodGet, "/memory?q=x"); code != http.StatusInternalServerError {
		t.Fatalf("failed search = %d, want 500", code)
	}
	code, body = get(t, New(Options{Store: st, Now: func() time.Time { return t0 }}), http.MethodGet, "/memory?q=x")
	mustContain(t, "memory off", body, "Memory is off")
	if code != http.StatusOK || strings.Contains(body, `name="q"`) {
		t.Fatalf("memory off: %d\n%s", code, body)
	}
}

type fakeNotes []notes.Note

func (f fakeNotes) AllNotes(context.Context) ([]notes.Note, error) { return f, nil }

// TestMemoryPageNotes: the Memory page lists the notes per scope, newest
// first, with where each is displayed; memory's search may be off.
func TestMemoryPageNotes(t *testing.T) {
	st := openStore(t)
	at := time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)
	ns := fakeNotes{
		{ID: "older", Scope: notes.ScopeHere, Text: "first <here>", Author: "alice", Conversation: binding.ConversationRef{Channel: "discord", ConversationID: "c1"},
			SessionKey: "agent:main:discord:channel:c1", MessageIDs: []string{"m1"}, At: at},
		{ID: "newer", Scope: notes.ScopeHere, Text: "second here", Author: "bob", Conversation: binding.ConversationRef{Channel: "discord", ConversationID: "c1"},
			SessionKey: "agent:main:discord:channel:c1", MessageIDs: []string{"m2"}, At: at.Add(time.Minute)},
		{ID: "srv", Scope: notes.ScopeServer, Text: "motto", Author: "olga", Server: "g1", Conversation: binding.ConversationRef{Channel: "discord", ConversationID: "c2"},
			MessageIDs: []string{"m3"}, At: at},
	}
	c := New(Options{Store: st, Now: func() time.Time { return t0 }, Notes: ns})
	code, body := get(t, c, http.MethodGet, "/memory")
	mustContain(t, "notes", body, "Memory is off", "<h3>me</h3>", "no me notes", "<h3>here</h3>", "first &lt;here&gt;",
		`href="/sessions/agent:main:discord:channel:c1"`, "<h3>server</h3>", "motto", "g1", "m3")
	if code != http.StatusOK || strings.Index(body, "second here") > strings.Index(body, "first &lt;here&gt;") {
		t.Fatalf("GET /memory = %d; want the newer note first\n%s", code, body)
	}
}
