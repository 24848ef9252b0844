package scheduler

import (
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/usertext"
)

// Hint names what would help the reader of a scheduler text next, as an
// action on jobs, never as a command: the scheduler does not know how its
// reader asks for things (a slash command, a text command, a model's tool).
// The boundary that shows the text renders the hint in its own terms
// (HintText). The nouns are core/usertext's, shared with the command layer.
type Hint = usertext.Hint

// Hints.
const (
	HintNone      = usertext.HintNone
	HintListJobs  = usertext.HintListJobs
	HintJobRuns   = usertext.HintJobRuns
	HintRunJob    = usertext.HintRunJob
	HintRemoveJob = usertext.HintRemoveJob
)

// HintText names a hint in its reader's own terms (usertext.HintText).
type HintText = usertext.HintText

// HintsByPlatform is each chat platform's HintText ("discord", "matrix").
type HintsByPlatform map[string]HintText

// For is the HintText of conv's platform (nil: none).
func (p HintsByPlatform) For(conv binding.ConversationRef) HintText {
	return p[conv.Normalize().Channel]
}

// HintOf is what e names as helping next (usertext.Hinted).
func (e *UserError) HintOf() Hint { return e.Hint }

// Render is e's text for a reader whose terms hint renders (nil: none): the
// message, then its hint: "there is no job "x": <list> shows the job ids",
// where <list> is what hint names for HintListJobs.
func (e *UserError) Render(hint HintText) string {
	c := usertext.Render(hint, e.Hint, e.JobID)
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
