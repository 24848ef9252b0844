package bot

import (
	"errors"
	"strings"

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
func forModel(err error) error {
	var ue *scheduler.UserError
	if !errors.As(err, &ue) || ue.Hint == scheduler.HintNone {
		return err
	}
	return &toolError{err: err, ue: ue}
}

// toolError is err with its scheduler hint rendered for the model.
type toolError struct {
	err error
	ue  *scheduler.UserError
}

// Error keeps the wrapping operations ("remove job x: ") before the
// rendered text: errors are wrapped with %w last, so the UserError's own
// text is the suffix.
func (e *toolError) Error() string {
	prefix, _ := strings.CutSuffix(e.err.Error(), e.ue.Error())
	return prefix + e.ue.Render(toolHint)
}

func (e *toolError) Unwrap() error { return e.err }
