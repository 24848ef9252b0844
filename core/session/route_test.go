package session_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/store/memory"
)

// routes is a route table the test changes, as a config change (or a
// channel moved to another category) changes the real one.
type routes struct {
	mu sync.Mutex
	to map[string]string // conversation id -> agent ("" = the default)
}

func (r *routes) Agent(ref binding.ConversationRef) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.to[ref.ConversationID]
}

func (r *routes) set(conv, agent string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to[conv] = agent
}

// TestRouteChangeStartsTheNewAgentsSessionAndSaysSoOnce: two channels
// routed to two agents keep two histories; moving a channel to another
// agent continues in that agent's own session there, announced by one
// line in the chat (in the transcript), once, also across a restart; moving
// it back is announced again and the first agent's history is still there.
func TestRouteChangeStartsTheNewAgentsSessionAndSaysSoOnce(t *testing.T) {
	r := &routes{to: map[string]string{"c2": "scribe"}}
	reg := memory.NewSessions()
	o := fixtureOptions{agents: []session.Agent{{ID: "scribe", Name: "Scribe"}}, routes: r, registry: reg}
	f := newFixture(t, o)
	c1, c2 := ref("c1"), ref("c2")
	main1, scribe1 := keyOf("c1"), sessionkey.ForConversation("scribe", c1)
	scribe2 := sessionkey.ForConversation("scribe", c2)

	f.say(c1, "hello main")
	f.say(c2, "hello scribe")
	f.settle()
	if got := texts(f.entries(main1)); !slices.Equal(got, []string{"user|hello main", "turn|echo: hello main"}) {
		t.Fatalf("c1 (main): %q", got)
	}
	if got := texts(f.entries(scribe2)); !slices.Equal(got, []string{"user|hello scribe", "turn|echo: hello scribe"}) {
		t.Fatalf("c2 (scribe): %q", got)
	}
	notices := func(conv string) []string {
		var out []string
		for _, d := range f.sender.to(conv) {
			if strings.HasPrefix(d.ID, "route:") {
				out = append(out, d.Text)
			}
		}
		return out
	}
	if n := notices("c2"); len(n) != 0 {
		t.Fatalf("a channel routed from the start announced a change: %q", n)
	}

	r.set("c1", "scribe")
	f.say(c1, "now scribe")
	f.settle()
	f.say(c1, "still scribe")
	f.settle()
	want := []string{"user|now scribe", "notice|🔀 Scribe answers in this conversation now, instead of Assistant; each keeps its own history here.",
		"turn|echo: now scribe", "user|still scribe", "turn|echo: still scribe"}
	if got := texts(f.entries(scribe1)); !slices.Equal(got, want) {
		t.Fatalf("c1 after the change (scribe):\n got %q\nwant %q", got, want)
	}
	if got := texts(f.entries(main1)); len(got) != 2 {
		t.Fatalf("main's history of c1 changed: %q", got)
	}
	if n := notices("c1"); len(n) != 1 {
		t.Fatalf("c1 displayed %d route notices, want 1: %q", len(n), n)
	}

	// A restart on the same store: the change is remembered, not announced again.
	f2 := newFixture(t, fixtureOptions{agents: o.agents, routes: r, registry: reg, store: f.store})
	f2.say(c1, "after restart")
	f2.settle()
	if n := notices("c1"); len(n) != 1 || len(f2.sender.to("c1")) != 1 {
		t.Fatalf("after a restart: first process %d notices, second process sent %q", len(n), texts(f2.entries(scribe1)))
	}

	// Back to main: announced again, main's history continues.
	r.set("c1", "")
	f2.say(c1, "main again")
	f2.settle()
	want = []string{"user|hello main", "turn|echo: hello main", "user|main again",
		"notice|🔀 Assistant answers in this conversation now, instead of Scribe; each keeps its own history here.", "turn|echo: main again"}
	if got := texts(f2.entries(main1)); !slices.Equal(got, want) {
		t.Fatalf("c1 back on main:\n got %q\nwant %q", got, want)
	}
}
