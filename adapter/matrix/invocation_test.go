package matrix

import (
	"maps"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/scheduler"
)

// TestCommandInvocation: a parsed text command reaches the core with its
// sub-command, the invoker, the room, and its options typed as the slash
// command's are (thread a bool, the rest strings).
func TestCommandInvocation(t *testing.T) {
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "!r:example.org"}
	for _, tc := range []struct {
		body     string
		name     string
		sub      string
		wantOpts map[string]any
	}{
		{`!spawn sum up the channel label=s thread=no`, "spawn", "", map[string]any{"task": "sum up the channel", "label": "s", "thread": false}},
		{`!spawn go thread=yes agent=coder`, "spawn", "", map[string]any{"task": "go", "thread": true, "agent": "coder"}},
		{`!cron add schedule="every 10m" ping them tz=Europe/Berlin`, "cron", "add", map[string]any{"schedule": "every 10m", "prompt": "ping them", "tz": "Europe/Berlin"}},
		{`!session idle 24h`, "session", "idle", map[string]any{"duration": "24h"}},
		{`!stop`, "stop", "", map[string]any{}},
	} {
		t.Run(tc.body, func(t *testing.T) {
			c, err := ParseCommand(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			v := c.Invocation(room, "@ann:example.org", CommandPlatform(true))
			if v.Name != tc.name || v.Sub != tc.sub || v.UserID != "@ann:example.org" || v.Conversation != room || v.Platform.Prefix != "!" {
				t.Fatalf("invocation = %+v", v)
			}
			if !maps.Equal(v.Options, tc.wantOpts) {
				t.Errorf("options = %#v, want %#v", v.Options, tc.wantOpts)
			}
		})
	}
}

// TestCommandPlatform: the core's texts name Matrix's syntax and links.
func TestCommandPlatform(t *testing.T) {
	p := CommandPlatform(false)
	for _, tc := range []struct{ got, want string }{
		{p.Command("cron", "list"), "!cron list"},
		{p.JobCommand(scheduler.HintJobRuns, "j1"), "`!cron runs j1`"},
		{p.Link(binding.ConversationRef{ConversationID: "!r:example.org"}), "https://matrix.to/#/%21r:example.org"},
		{p.Link(binding.ConversationRef{ConversationID: "$ev", ParentConversationID: "!r:example.org"}), "https://matrix.to/#/%21r:example.org/$ev"},
		{p.ThreadBindingsSetting, "discord.threadBindings.enabled"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if p.ThreadBindings || !CommandPlatform(true).ThreadBindings {
		t.Error("ThreadBindings does not follow the argument")
	}
}
