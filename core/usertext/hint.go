package usertext

import (
	"errors"
	"fmt"
	"strings"
)

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

// Hinted is an error whose text is written for its reader and names what would help next as a hint (the
// scheduler's UserError): its reader's boundary renders it (Render) in its own terms.
type Hinted interface {
	error
	Render(HintText) string
	HintOf() Hint
}

// ForReader is err for a reader whose terms f names (the model's tools): a Hinted error in it reads with its hint
// rendered by f, after the operations that wrapped it ("cancel job x: there is no job "x": list_jobs shows the job
// ids"); every other error is returned as it is. errors.Is and As still see err.
func ForReader(err error, f HintText) error {
	var h Hinted
	if !errors.As(err, &h) || h.HintOf() == HintNone {
		return err
	}
	return &rendered{err: err, h: h, f: f}
}

// rendered is err with its hint rendered for one reader.
type rendered struct {
	err error
	h   Hinted
	f   HintText
}

// Error keeps the wrapping operations before the rendered text: errors are wrapped with %w last, so the hinted
// error's own text is the suffix.
func (e *rendered) Error() string {
	prefix, _ := strings.CutSuffix(e.err.Error(), e.h.Error())
	return prefix + e.h.Render(e.f)
}

func (e *rendered) Unwrap() error { return e.err }
