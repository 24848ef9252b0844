package discord

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/scheduler"
)

// TestCommandPlatform: the core's command texts read on Discord exactly as
// they did when adapter/discord wrote them: slash commands, options as the
// client shows them, <@user> and <#channel> markup, Discord's permission
// names and its config key (core/command's TestCommands holds the whole
// sentences over the same fragments).
func TestCommandPlatform(t *testing.T) {
	p := CommandPlatform(true)
	for _, tc := range []struct{ got, want string }{
		{p.Name, "Discord"},
		{p.Command("focus"), "/focus"},
		{p.Command("cron", "list"), "/cron list"},
		{p.Option("task", "summarise this channel"), "task: summarise this channel"},
		{p.Option("thread", "false"), "thread:false"},
		{p.Option("target", "<subagent-label|session-key>"), "target:<subagent-label|session-key>"},
		{p.Mention("42"), "<@42>"},
		{p.Link(binding.ConversationRef{ConversationID: "77", ParentConversationID: "5"}), "<#77>"},
		{p.SharedPlace, "a server channel or thread"},
		{p.ThreadPermissions, "Create Public Threads and Send Messages in Threads in this channel"},
		{p.ThreadBindingsSetting, "discord.threadBindings.enabled"},
		{p.JobCommand(scheduler.HintJobRuns, "j1"), "`/cron runs j1`"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if !p.ThreadBindings || CommandPlatform(false).ThreadBindings {
		t.Error("ThreadBindings does not follow discord.threadBindings.enabled")
	}
}

// TestCoreInvocation: a slash command reaches the core with its
// sub-command, its options by their Discord type, the invoker and the
// conversation; discord.access is its admission.
func TestCoreInvocation(t *testing.T) {
	var in discordgo.Interaction
	payload := `{"type":2,"guild_id":"","channel_id":"5","user":{"id":"9","username":"ann"},"data":{"name":"cron","options":[{"name":"add","type":1,"options":[` +
		`{"name":"schedule","type":3,"value":" every 10m "},{"name":"thread","type":5,"value":true},{"name":"n","type":4,"value":3},{"name":"bad","type":5,"value":"yes"}]}]}}`
	if err := json.Unmarshal([]byte(payload), &in); err != nil {
		t.Fatal(err)
	}
	v := parseInvocation(&in)
	v.conv = binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "user:9"}
	g := &Gateway{opt: GatewayOptions{ThreadBindings: true}}
	got := g.coreInvocation(v)
	if got.Name != "cron" || got.Sub != "add" || got.UserID != "9" || got.Conversation != v.conv || !got.Platform.ThreadBindings || got.Admit == nil {
		t.Fatalf("invocation = %+v", got)
	}
	want := map[string]any{"schedule": "every 10m", "thread": true, "n": int64(3)}
	if !maps.Equal(got.Options, want) {
		t.Errorf("options = %#v, want %#v", got.Options, want)
	}
}
