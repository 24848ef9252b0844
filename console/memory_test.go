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
