package session_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// TestParseTarget: the Discord forms are read as before (the manager's
// platform and account), with the same error text; Matrix targets carry
// their platform and ids with ':' and '$', a thread its room.
func TestParseTarget(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tests := []struct {
		to   string
		want binding.ConversationRef
		err  string
	}{
		{"channel:123", ref("123"), ""},
		{" channel:c2 ", ref("c2"), ""},
		{"user:42", ref("user:42"), ""},
		{"user:@alice", ref("user:@alice"), ""}, // not a Matrix id: a Discord user as before
		{"matrix:!abc:example.org", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!abc:example.org"}, ""},
		{"!abc:example.org:8448", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!abc:example.org:8448"}, ""},
		{"channel:!abc:example.org", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!abc:example.org"}, ""},
		{"matrix:!abc:example.org/$root", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "$root", ParentConversationID: "!abc:example.org"}, ""},
		{"matrix:@alice:example.org", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "user:@alice:example.org"}, ""},
		{"user:@alice:example.org", binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "user:@alice:example.org"}, ""},
		{"#general", binding.ConversationRef{}, `target "#general": write channel:<id> or user:<id>`},
		{"channel:", binding.ConversationRef{}, `target "channel:": write channel:<id> or user:<id>`},
		{"", binding.ConversationRef{}, `target "": write channel:<id> or user:<id>`},
		{"matrix:$root", binding.ConversationRef{}, `target "matrix:$root": a thread needs its room: write matrix:!room:server for a room, matrix:!room:server/$event for the thread`},
		{"channel:$root", binding.ConversationRef{}, `target "channel:$root": a thread needs its room`},
		{"matrix:general", binding.ConversationRef{}, `target "matrix:general": not a Matrix room or user id`},
	}
	for _, tc := range tests {
		got, err := f.m.ParseTarget(tc.to)
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want error %q", tc.to, got, err, tc.err)
			}
		case err != nil || got != tc.want.Normalize():
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.to, got, err, tc.want.Normalize())
		}
	}
}

// TestSendMessageToMatrixThread: send_message to a Matrix thread delivers
// to that thread with its room (the sender needs it) and writes the entry
// into the thread's own session, whose key holds the room and the event.
func TestSendMessageToMatrixThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c1"), `!tool send_message {"to":"matrix:!abc:example.org/$root","text":"hello thread"}`)
	f.settle()
	sent := f.sender.to("$root")
	want := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "$root", ParentConversationID: "!abc:example.org"}
	if len(sent) != 1 || sent[0].Target != want {
		t.Fatalf("sends to $root: %+v", sent)
	}
	key := "agent:main:matrix:channel:!abc:example.org/$root"
	if got := texts(f.entries(key)); !slices.Equal(got, []string{"message-tool|hello thread"}) {
		t.Fatalf("%s entries = %q", key, got)
	}
	if sessionkey.ForConversation("main", want) != key {
		t.Fatal("the thread's key is not its conversation's own")
	}
}

// TestSpawnFromMatrixThreadKeepsPlatform: a subagent spawned inside a
// Matrix thread gets its thread in that thread's room, on Matrix (not on
// the manager's default platform).
func TestSpawnFromMatrixThreadKeepsPlatform(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	thread := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "$root", ParentConversationID: "!abc:example.org"}
	res, err := f.m.Spawn(context.Background(), spawnReq("planner", true, thread))
	if err != nil {
		t.Fatal(err)
	}
	want := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!abc:example.org"}
	if len(f.threads.refs) != 1 || f.threads.refs[0] != want || res.Thread == nil || res.Thread.Channel != "matrix" {
		t.Fatalf("thread parents %+v, thread %+v", f.threads.refs, res.Thread)
	}
}

// TestStreamingAgentWherePlatformHasNoLiveMessages: an agent that streams
// replies, in a conversation whose platform's sender cannot show live
// messages (delivery.Outbound.LiveTo is false: the fixture's sender is a
// plain Sender), gets its reply sent whole, not lost to ErrNotLive.
func TestStreamingAgentWherePlatformHasNoLiveMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{stream: true})
	if f.out.LiveTo(ref("c1")) {
		t.Fatal("the fixture's sender shows live messages")
	}
	f.say(ref("c1"), "hello")
	f.settle()
	if got := texts(f.entries(keyOf("c1"))); !slices.Equal(got, []string{"user|hello", "turn|echo: hello"}) {
		t.Fatalf("entries = %q", got)
	}
	if sent := f.sender.to("c1"); len(sent) != 1 || sent[0].Text != "echo: hello" {
		t.Fatalf("sent %+v", sent)
	}
}
