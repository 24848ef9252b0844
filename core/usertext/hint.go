package usertext

import "fmt"

// Hint names what would help the reader of a text next, as an action on jobs.
type Hint string

// Hints.
const (
	HintNone      Hint = ""
	HintListJobs  Hint = "list-jobs"  // listing the jobs shows their ids
	HintJobRuns   Hint = "job-runs"   // the job's run history
	HintRunJob    Hint = "run-job"    // running the job now
	HintRemoveJob Hint = "remove-job" // removing the job
)

// HintText names, in the reader's own terms, what does what h says for the job jobID ("" for hints about no job):
// a slash command with its arguments on Discord, a tool's name for the model. "" means the reader has nothing for
// it; the text then leaves the hint out.
type HintText func(h Hint, jobID string) string

// Render is what f names for h and jobID ("" for HintNone or a nil f).
func Render(f HintText, h Hint, jobID string) string {
	if f == nil || h == HintNone {
		return ""
	}
	return f(h, jobID)
}

// Line renders a sentence naming what hints say (format's verbs, in order), or "" when f lacks any of them.
func Line(f HintText, jobID string, format string, hints ...Hint) string {
	args := make([]any, len(hints))
	for i, h := range hints {
		c := Render(f, h, jobID)
		if c == "" {
			return ""
		}
		args[i] = c
	}
	return fmt.Sprintf(format, args...)
}
