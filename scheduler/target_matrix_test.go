package scheduler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/scheduler"
)

var (
	matrixRoom   = binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!abc:example.org"}
	matrixThread = binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "$root", ParentConversationID: "!abc:example.org"}
	matrixDM     = binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "user:@alice:example.org"}
)

// TestParseToForms: every Discord form reads as before, the Matrix forms
// carry their platform and ids with ':' and '$', and FormatTo round-trips.
func TestParseToForms(t *testing.T) {
	discordLike := binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "100"}
	matrixLike := binding.ConversationRef{Channel: "matrix", AccountID: "mx", ConversationID: "!home:example.org"}
	tests := []struct {
		name, to string
		like     binding.ConversationRef
		want     binding.ConversationRef
		format   string
	}{
		{"discord channel", "channel:200", discordLike, binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "200"}, "channel:200"},
		{"discord dm", "user:42", discordLike, binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "user:42"}, "user:42"},
		{"discord mention", " <#300> ", discordLike, binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "300"}, "channel:300"},
		{"discord form with no creating chat", "channel:200", binding.ConversationRef{}, binding.ConversationRef{Channel: "discord", ConversationID: "200"}, "channel:200"},
		{"discord form from a matrix room names discord", "channel:200", matrixLike, binding.ConversationRef{Channel: "discord", ConversationID: "200"}, "channel:200"},
		{"matrix room", "matrix:!abc:example.org", discordLike, matrixRoom, "matrix:!abc:example.org"},
		{"matrix room from matrix keeps the account", "!abc:example.org", matrixLike, binding.ConversationRef{Channel: "matrix", AccountID: "mx", ConversationID: "!abc:example.org"}, "matrix:!abc:example.org"},
		{"matrix thread", "matrix:!abc:example.org/$root", discordLike, matrixThread, "matrix:!abc:example.org/$root"},
		{"matrix dm", "matrix:@alice:example.org", discordLike, matrixDM, "matrix:@alice:example.org"},
		{"matrix room with port", "matrix:!abc:example.org:8448", discordLike, binding.ConversationRef{Channel: "matrix", ConversationID: "!abc:example.org:8448"}, "matrix:!abc:example.org:8448"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scheduler.ParseTo(tc.to, tc.like)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want.Normalize() {
				t.Fatalf("ParseTo = %+v, want %+v", got, tc.want.Normalize())
			}
			if f := scheduler.FormatTo(got); f != tc.format {
				t.Fatalf("FormatTo = %q, want %q", f, tc.format)
			}
			if again, err := scheduler.ParseTo(scheduler.FormatTo(got), tc.like); err != nil || again != got {
				t.Fatalf("ParseTo(FormatTo) = %+v, %v", again, err)
			}
		})
	}
}

// TestParseToErrors: the Discord error text is unchanged; a Matrix-shaped
// target that is not whole says what is missing and how to write one.
func TestParseToErrors(t *testing.T) {
	tests := []struct{ to, want string }{
		{"#general", `"#general" is not a delivery target: write ` + "`channel:<id>` for a channel or thread, or `user:<id>` for a DM"},
		{"channel:abc", `"channel:abc" is not a delivery target: write ` + "`channel:<id>` for a channel or thread, or `user:<id>` for a DM"},
		{"@alice", `"@alice" is not a delivery target: write ` + "`channel:<id>` for a channel or thread, or `user:<id>` for a DM"},
		{"matrix:$root", `target "matrix:$root": a thread needs its room: write matrix:!room:server for a room, matrix:!room:server/$event for the thread under that root event, or matrix:@user:server for a DM`},
		{"matrix:!abc", `target "matrix:!abc": not a Matrix room id: write matrix:!room:server`},
	}
	for _, tc := range tests {
		_, err := scheduler.ParseTo(tc.to, chat)
		var ue *scheduler.UserError
		if !errors.As(err, &ue) || !strings.HasPrefix(ue.UserMessage(), tc.want) {
			t.Errorf("ParseTo(%q) = %v, want a *UserError %q", tc.to, err, tc.want)
		}
	}
}

// TestMatrixSessionTargets: a job targeting a Matrix conversation's own
// session (its key has ':' and '$' in the id) is in-chat there and runs in
// that conversation, thread room included.
func TestMatrixSessionTargets(t *testing.T) {
	for _, conv := range []binding.ConversationRef{matrixRoom, matrixThread, matrixDM} {
		t.Run(conv.ConversationID, func(t *testing.T) {
			key := sessionkey.ForConversation("main", conv)
			j := scheduler.Job{ID: "j", Target: "session:" + key, CreatedIn: conv}
			if m := scheduler.RequiredMode(j); m != scheduler.ModeInChat {
				t.Fatalf("RequiredMode(session:%s) = %s, want in-chat", key, m)
			}
			j.StoredMode = scheduler.ModeInChat
			got, err := scheduler.DeliveryTarget(j)
			if err != nil || got != conv.Normalize() {
				t.Fatalf("DeliveryTarget = %+v, %v; want %+v", got, err, conv.Normalize())
			}
			// Delivering to its own conversation by target keeps it in-chat; elsewhere it is background.
			j.To = scheduler.FormatTo(conv)
			if m := scheduler.RequiredMode(j); m != scheduler.ModeInChat {
				t.Fatalf("to %s: RequiredMode = %s, want in-chat", j.To, m)
			}
			j.To = "matrix:!other:example.org"
			if m := scheduler.RequiredMode(j); m != scheduler.ModeBackground {
				t.Fatalf("to %s: RequiredMode = %s, want background", j.To, m)
			}
		})
	}
}

// TestAddMatrixJob: a job created in a Discord chat can deliver to a Matrix
// thread, and its description names that target.
func TestAddMatrixJob(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Schedule: "every 1h", To: "matrix:!abc:example.org/$root"})
	if j.Target != scheduler.TargetIsolated || j.To != "matrix:!abc:example.org/$root" {
		t.Fatalf("job target=%q to=%q", j.Target, j.To)
	}
	got, err := scheduler.DeliveryTarget(j)
	if err != nil || got != matrixThread.Normalize() {
		t.Fatalf("DeliveryTarget = %+v, %v", got, err)
	}
	if d := e.s.Describe(j); !strings.Contains(d, "`matrix:!abc:example.org/$root`") {
		t.Fatalf("describe %q lacks the target", d)
	}
}
