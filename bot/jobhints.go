package bot

import (
	"github.com/agentbot/agentbot/core/usertext"
	"github.com/agentbot/agentbot/scheduler"
)

// toolHint names the model's job tool that does what a scheduler hint says
// (the scheduler's texts name no command or tool); "" where the model has
// none: it cannot read a job's runs nor run a job now.
func toolHint(h scheduler.Hint, _ string) string {
	switch h {
	case scheduler.HintListJobs:
		return "list_jobs"
	case scheduler.HintRemoveJob:
		return "cancel_job"
	}
	return ""
}

// forModel is the model's job tools' error boundary: a scheduler error with
// a hint reads in the model's terms ("list_jobs shows the job ids"), after
// the operation that failed; every other error is returned as it is.
func forModel(err error) error { return usertext.ForReader(err, toolHint) }
