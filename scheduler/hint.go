package scheduler

import (
	"fmt"

	"github.com/agentbot/agentbot/core/binding"
)

// Hint names what would help the reader of a scheduler text next, as an
// action on jobs, never as a command: the scheduler does not know how its
// reader asks for things (a slash command, a text command, a model's tool).
// The boundary that shows the text renders the hint in its own terms
// (HintText).
type Hint string

// Hints.
const (
	HintNone      Hint = ""
	HintListJobs  Hint = "list-jobs"  // listing the jobs shows their ids
	HintJobRuns   Hint = "job-runs"   // the job's run history
	HintRunJob    Hint = "run-job"    // running the job now
	HintRemoveJob Hint = "remove-job" // removing the job
)

// HintText names, in the reader's own terms, what does what h says for the
// job jobID ("" for hints about no job): a slash command with its
// arguments on Discord, a tool's name for the model. "" means the reader has nothing for it; the
// text then leaves the hint out.
type HintText func(h Hint, jobID string) string

// HintsByPlatform is each chat platform's HintText ("discord", "matrix").
type HintsByPlatform map[string]HintText

// For is the HintText of conv's platform (nil: none).
func (p HintsByPlatform) For(conv binding.ConversationRef) HintText {
	return p[conv.Normalize().Channel]
}

func (f HintText) render(h Hint, jobID string) string {
	if f == nil || h == HintNone {
		return ""
	}
	return f(h, jobID)
}

// Render is e's text for a reader whose terms hint renders (nil: none): the
// message, then its hint: "there is no job "x": <list> shows the job ids",
// where <list> is what hint names for HintListJobs.
func (e *UserError) Render(hint HintText) string {
	c := hint.render(e.Hint, e.JobID)
	if c == "" {
		return e.Msg
	}
	switch e.Hint {
	case HintListJobs:
		return e.Msg + ": " + c + " shows the job ids"
	default:
		return e.Msg + " (" + c + ")"
	}
}

// hintLine renders a sentence naming commands, or "" when the reader lacks
// any of them (a sentence with a hole reads worse than none).
func (f HintText) hintLine(jobID string, format string, hints ...Hint) string {
	args := make([]any, len(hints))
	for i, h := range hints {
		c := f.render(h, jobID)
		if c == "" {
			return ""
		}
		args[i] = c
	}
	return fmt.Sprintf(format, args...)
}
