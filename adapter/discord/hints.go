package discord

import "github.com/agentbot/agentbot/core/usertext"

// JobCommand names the /cron command that does what a scheduler hint says,
// with its job id (usertext.HintText), as Discord users type it: the
// scheduler's notices into Discord chats are rendered with it (command
// replies render their hints in core/command with CommandPlatform).
func JobCommand(h usertext.Hint, jobID string) string {
	return CommandPlatform(false).JobCommand(h, jobID)
}
