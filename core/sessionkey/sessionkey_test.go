package sessionkey_test

import (
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

func ref(platform, id, parent string) binding.ConversationRef {
	return binding.ConversationRef{Channel: platform, AccountID: "default", ConversationID: id, ParentConversationID: parent}
}

// TestForConversationRoundTrips: every conversation's own key reads back as
// the same conversation (platform, id, and for a Matrix thread its room),
// Discord keys are byte for byte the stored ones, and ids keep their ':' and
// '$'.
func TestForConversationRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		ref  binding.ConversationRef
		key  string
	}{
		{"discord channel", ref("discord", "123456789012345678", ""), "agent:main:discord:channel:123456789012345678"},
		{"discord thread (parent not in the key)", ref("discord", "222", "111"), "agent:main:discord:channel:222"},
		{"discord dm", ref("discord", "user:42", ""), "agent:main:discord:dm:42"},
		{"matrix room", ref("matrix", "!abc:example.org", ""), "agent:main:matrix:channel:!abc:example.org"},
		{"matrix room, server with port", ref("matrix", "!abc:example.org:8448", ""), "agent:main:matrix:channel:!abc:example.org:8448"},
		{"matrix room, ipv6 server", ref("matrix", "!abc:[::1]:8448", ""), "agent:main:matrix:channel:!abc:[::1]:8448"},
		{"matrix thread", ref("matrix", "$Ev-_09abc", "!abc:example.org"), "agent:main:matrix:channel:!abc:example.org/$Ev-_09abc"},
		{"matrix thread, v3 event id with / and +", ref("matrix", "$a/b+c", "!abc:example.org"), "agent:main:matrix:channel:!abc:example.org/$a/b+c"},
		{"matrix thread, v1 event id with server", ref("matrix", "$ev:example.org", "!abc:example.org:8448"), "agent:main:matrix:channel:!abc:example.org:8448/$ev:example.org"},
		{"matrix thread without its room", ref("matrix", "$ev", ""), "agent:main:matrix:channel:$ev"},
		{"matrix dm", ref("matrix", "user:@alice:example.org", ""), "agent:main:matrix:dm:@alice:example.org"},
		{"matrix dm, server with port", ref("matrix", "user:@alice:example.org:8448", ""), "agent:main:matrix:dm:@alice:example.org:8448"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := sessionkey.ForConversation("main", tc.ref)
			if key != tc.key {
				t.Fatalf("ForConversation = %q, want %q", key, tc.key)
			}
			agent, got, ok := sessionkey.ConversationOf(key)
			want := tc.ref.Normalize()
			want.AccountID = got.AccountID // the key holds no account
			if tc.ref.Channel == "discord" {
				want.ParentConversationID = "" // nor a Discord thread's parent
			}
			if !ok || agent != "main" || got != want {
				t.Fatalf("ConversationOf(%q) = %q, %+v, %v; want main, %+v", key, agent, got, ok, want)
			}
			if sessionkey.Agent(key) != "main" || sessionkey.KindOf(key) != sessionkey.KindMain {
				t.Fatalf("Agent = %q, KindOf = %q", sessionkey.Agent(key), sessionkey.KindOf(key))
			}
		})
	}
}

func TestConversationOfRefusesOtherKeys(t *testing.T) {
	for _, key := range []string{
		"", "x", "agent:main", "agent:main:discord", "agent:main:discord:channel:",
		"agent:main:subagent:abc",
		"agent:main:subagent:channel:5", // a subagent id shaped like a conversation
		"agent:main:cron:j1:run:r1",
		"agent:main:cron:channel:5",
		"agent:main:discord:thread:5",
		"agent:main:discord:channel:channel:5", // not canonical: ForConversation never writes it
		"session:agent:main:discord:channel:5",
	} {
		if agent, ref, ok := sessionkey.ConversationOf(key); ok {
			t.Errorf("ConversationOf(%q) = %q, %+v; want not a conversation's key", key, agent, ref)
		}
	}
}

func TestKindAndAgentOfKeysWithColons(t *testing.T) {
	tests := []struct {
		key   string
		agent string
		kind  sessionkey.Kind
	}{
		{"agent:main:matrix:channel:!abc:example.org", "main", sessionkey.KindMain},
		{"agent:code-review:matrix:channel:!abc:example.org/$ev", "code-review", sessionkey.KindMain},
		{sessionkey.Subagent("main", "x:y"), "main", sessionkey.KindSubagent},
		{sessionkey.CronRun("main", "j", "r"), "main", sessionkey.KindJobRun},
		{"agent:main:x", "main", ""},
		{"other:main:matrix:channel:!a:b", "", ""},
	}
	for _, tc := range tests {
		if a, k := sessionkey.Agent(tc.key), sessionkey.KindOf(tc.key); a != tc.agent || k != tc.kind {
			t.Errorf("%q: Agent = %q, KindOf = %q; want %q, %q", tc.key, a, k, tc.agent, tc.kind)
		}
	}
}

func TestParseMatrixTarget(t *testing.T) {
	tests := []struct {
		to      string
		matched bool
		want    binding.ConversationRef // Channel matrix, account default
		err     string                  // in the error, when matched and wrong
	}{
		{"matrix:!abc:example.org", true, ref("matrix", "!abc:example.org", ""), ""},
		{"  MATRIX:!abc:example.org  ", true, ref("matrix", "!abc:example.org", ""), ""},
		{"!abc:example.org", true, ref("matrix", "!abc:example.org", ""), ""},
		{"channel:!abc:example.org", true, ref("matrix", "!abc:example.org", ""), ""},
		{"matrix:!abc:example.org:8448", true, ref("matrix", "!abc:example.org:8448", ""), ""},
		{"matrix:!abc:example.org/$ev", true, ref("matrix", "$ev", "!abc:example.org"), ""},
		{"!abc:example.org/$ev:other.org", true, ref("matrix", "$ev:other.org", "!abc:example.org"), ""},
		{"matrix:!abc:[::1]:8448/$a/b+c", true, ref("matrix", "$a/b+c", "!abc:[::1]:8448"), ""},
		{"matrix:@alice:example.org", true, ref("matrix", "user:@alice:example.org", ""), ""},
		{"@alice:example.org", true, ref("matrix", "user:@alice:example.org", ""), ""},
		{"user:@alice:example.org", true, ref("matrix", "user:@alice:example.org", ""), ""},
		{"matrix:$ev", true, binding.ConversationRef{}, "a thread needs its room"},
		{"$ev", true, binding.ConversationRef{}, "a thread needs its room"},
		{"channel:$ev", true, binding.ConversationRef{}, "a thread needs its room"},
		{"matrix:", true, binding.ConversationRef{}, "not a Matrix room or user id"},
		{"matrix:general", true, binding.ConversationRef{}, "not a Matrix room or user id"},
		{"matrix:123", true, binding.ConversationRef{}, "not a Matrix room or user id"},
		{"matrix:!abc", true, binding.ConversationRef{}, "not a Matrix room id"},
		{"matrix:!:example.org", true, binding.ConversationRef{}, "not a Matrix room id"},
		{"matrix:!abc:", true, binding.ConversationRef{}, "not a Matrix room id"},
		{"matrix:!abc:example.org/general", true, binding.ConversationRef{}, "not a Matrix room id"},
		{"matrix:!abc:example.org/$", true, binding.ConversationRef{}, "not a Matrix event id"},
		{"matrix:!abc:example.org/$e v", true, binding.ConversationRef{}, "not a Matrix event id"},
		{"matrix:@alice", true, binding.ConversationRef{}, "not a Matrix user id"},
		{"matrix:!a b:example.org", true, binding.ConversationRef{}, "not a Matrix room id"},
		// Not Matrix-shaped: the caller's own forms and errors.
		{"channel:123", false, binding.ConversationRef{}, ""},
		{"user:42", false, binding.ConversationRef{}, ""},
		{"user:@alice", false, binding.ConversationRef{}, ""},
		{"<#123>", false, binding.ConversationRef{}, ""},
		{"@alice", false, binding.ConversationRef{}, ""},
		{"!abc", false, binding.ConversationRef{}, ""},
		{"#general", false, binding.ConversationRef{}, ""},
		{"", false, binding.ConversationRef{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.to, func(t *testing.T) {
			got, matched, err := sessionkey.ParseMatrixTarget(tc.to)
			if matched != tc.matched {
				t.Fatalf("matched = %v, want %v (ref %+v, err %v)", matched, tc.matched, got, err)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "matrix:!room:server") {
					t.Fatalf("err = %v, want one saying %q and how to write a target", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.matched {
				return
			}
			if got != tc.want.Normalize() {
				t.Fatalf("ref = %+v, want %+v", got, tc.want.Normalize())
			}
			// FormatMatrixTarget writes it back in the canonical form, which reads as the same ref.
			s := sessionkey.FormatMatrixTarget(got)
			if !strings.HasPrefix(s, "matrix:") {
				t.Fatalf("FormatMatrixTarget = %q", s)
			}
			again, ok, err := sessionkey.ParseMatrixTarget(s)
			if err != nil || !ok || again != got {
				t.Fatalf("ParseMatrixTarget(%q) = %+v, %v, %v; want %+v", s, again, ok, err, got)
			}
			// The target's conversation has the same own session key as its parsed ref.
			if _, back, ok := sessionkey.ConversationOf(sessionkey.ForConversation("main", got)); !ok || back.ConversationID != got.ConversationID || back.ParentConversationID != got.ParentConversationID {
				t.Fatalf("key of %+v reads back as %+v", got, back)
			}
		})
	}
}
