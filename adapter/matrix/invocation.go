package matrix

import (
	"net/url"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
)

// CommandPlatform is how the core's command texts (core/command) speak in
// Matrix rooms: "!" text commands with name=value options (ParseCommand's
// grammar), user ids as they are (every send carries "m.mentions": {}, so
// naming a user pings no one), matrix.to links to rooms and threads, and
// Matrix's words for where bindings live and what creating a thread needs.
// threadBindings is the process's thread-bindings setting (discord.threadBindings).
func CommandPlatform(threadBindings bool) command.Platform {
	return command.Platform{
		Name:                  "Matrix",
		Prefix:                CommandPrefix,
		Link:                  permalink,
		SharedPlace:           "a room or a thread (not a direct chat)",
		ThreadPermissions:     "the power to send messages in this room",
		ThreadBindings:        threadBindings,
		ThreadBindingsSetting: "discord.threadBindings.enabled", // one switch for the process (docs/DECISIONS.md)
		PublicReplies:         true,
	}
}

// permalink is a matrix.to link to a room, or to a thread's root event in
// its room (a thread's conversation id is its root, its parent the room).
func permalink(conv binding.ConversationRef) string {
	id := url.PathEscape(conv.ConversationID)
	if conv.ParentConversationID != "" && strings.HasPrefix(conv.ConversationID, "$") {
		id = url.PathEscape(conv.ParentConversationID) + "/" + id
	}
	return "https://matrix.to/#/" + id
}

// Invocation is c as the core's commands take it (command.Commands.Run),
// run by userID in conv and worded for p (CommandPlatform). Boolean
// options (ParseCommand wrote "true" or "false") become bools; the others
// stay strings. Admit is left nil (no access policy for Matrix yet); a
// caller with one sets it.
func (c Command) Invocation(conv binding.ConversationRef, userID string, p command.Platform) command.Invocation {
	spec := commandSpecs[c.Name]
	if c.Sub != "" {
		spec = spec.subs[c.Sub]
	}
	opts := make(map[string]any, len(c.Options))
	for name, v := range c.Options {
		if o, ok := spec.opt(name); ok && o.boolean {
			opts[name] = v == "true"
			continue
		}
		opts[name] = v
	}
	return command.Invocation{Platform: p, Conversation: conv, UserID: userID, EventID: c.EventID, Name: c.Name, Sub: c.Sub, Options: opts}
}
