package discord

import "github.com/agentbot/agentbot/scheduler"

// JobCommand names the /cron command that does what a scheduler hint says,
// with its job id: the scheduler's texts name no command (scheduler.Hint),
// so this adapter renders them for its chats (slash replies and the
// scheduler's notices alike). "" for a hint no command serves.
func JobCommand(h scheduler.Hint, jobID string) string {
	switch h {
	case scheduler.HintListJobs:
		return "`/cron list`"
	case scheduler.HintJobRuns:
		return "`/cron runs " + jobID + "`"
	case scheduler.HintRunJob:
		return "`/cron run " + jobID + "`"
	case scheduler.HintRemoveJob:
		return "`/cron remove " + jobID + "`"
	}
	return ""
}

// hinted is a user-facing error that names what would help next as a hint
// (scheduler.UserError), rendered in the reader's terms.
type hinted interface {
	Render(scheduler.HintText) string
}

// userText is what the command boundary shows for a user-facing error: its
// message, with its hint as this adapter's command when it has one.
func userText(uf userFacing) string {
	if h, ok := uf.(hinted); ok {
		return h.Render(JobCommand)
	}
	return uf.UserMessage()
}
