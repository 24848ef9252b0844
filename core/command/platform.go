package command

import (
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/usertext"
)

// Platform is what a command's texts need to know of the chat they are
// written for: how its users type a command and its options, how a user and
// a conversation are named in its markup, and its settings. Each adapter
// builds its own (Discord: discord.CommandPlatform); the zero value writes
// plain ids and "name=value" options.
type Platform struct {
	// Name is the platform as its users call it ("Discord").
	Name string
	// Prefix starts a command as typed: "/" on Discord, "!" on Matrix.
	Prefix string
	// Option writes an option as typed after its command (Discord
	// "thread:false"); nil: name=value, quoted when it holds a space.
	Option func(name, value string) string
	// Mention names a user (Discord "<@id>"); nil: the id. The answer is
	// sent without pings (invariant 12) either way.
	Mention func(userID string) string
	// Link names a conversation (a channel, a thread) so the reader can
	// open it (Discord "<#id>"); nil: its id.
	Link func(conv binding.ConversationRef) string
	// SharedPlace is where bindings live, for "run this in ..." (Discord
	// "a server channel or thread").
	SharedPlace string
	// ThreadPermissions is what the bot must be granted to create a
	// thread, for "give me ..." (Discord "Create Public Threads and Send
	// Messages in Threads in this channel").
	ThreadPermissions string
	// ThreadBindings: /focus and external agents may bind threads;
	// ThreadBindingsSetting is the config key that enables them
	// ("discord.threadBindings.enabled").
	ThreadBindings        bool
	ThreadBindingsSetting string
	// PublicReplies: every command reply is shown to everyone in the
	// conversation (Matrix has no ephemeral answers), so listings are cut
	// to what belongs to the conversation's own room (/cron list).
	PublicReplies bool
}

// Command is a command as typed: Command("cron", "list") is "/cron list"
// on Discord.
func (p Platform) Command(words ...string) string {
	return p.Prefix + strings.Join(words, " ")
}

// option is one option as typed.
func (p Platform) option(name, value string) string {
	if p.Option != nil {
		return p.Option(name, value)
	}
	if strings.ContainsAny(value, " \t") {
		value = `"` + value + `"`
	}
	return name + "=" + value
}

func (p Platform) mention(userID string) string {
	if p.Mention != nil {
		return p.Mention(userID)
	}
	return userID
}

func (p Platform) link(conv binding.ConversationRef) string {
	if p.Link != nil {
		return p.Link(conv)
	}
	return conv.ConversationID
}

// JobCommand names the /cron command that does what a scheduler hint says,
// with its job id, as p's users type it (usertext.HintText): the
// scheduler's texts name no command (usertext.Hint), so each platform
// renders them for its chats (command replies and the scheduler's notices
// alike). "" for a hint no command serves.
func (p Platform) JobCommand(h usertext.Hint, jobID string) string {
	switch h {
	case usertext.HintListJobs:
		return "`" + p.Command("cron", "list") + "`"
	case usertext.HintJobRuns:
		return "`" + p.Command("cron", "runs", jobID) + "`"
	case usertext.HintRunJob:
		return "`" + p.Command("cron", "run", jobID) + "`"
	case usertext.HintRemoveJob:
		return "`" + p.Command("cron", "remove", jobID) + "`"
	}
	return ""
}
