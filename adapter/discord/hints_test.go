package discord

import (
	"testing"

	"github.com/agentbot/agentbot/scheduler"
)

// TestUserTextRendersSchedulerHints (issue 18): the scheduler's errors name
// no command; the slash-command boundary renders their hints as /cron
// commands, so the replies read exactly as they did when the scheduler
// wrote the commands itself. Other user-facing errors show their message.
func TestUserTextRendersSchedulerHints(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  userFacing
		want string
	}{
		{"unknown job", &scheduler.UserError{Msg: `there is no job "nope"`, Err: scheduler.ErrNotFound, Hint: scheduler.HintListJobs},
			"there is no job \"nope\": `/cron list` shows the job ids"},
		{"running job", &scheduler.UserError{Msg: "job j1 is running right now; try again when it finished", Err: scheduler.ErrBusy, Hint: scheduler.HintJobRuns, JobID: "j1"},
			"job j1 is running right now; try again when it finished (`/cron runs j1`)"},
		{"no hint", &scheduler.UserError{Msg: "the prompt is empty"}, "the prompt is empty"},
		{"not the scheduler's", &userError{msg: "pick an agent"}, "pick an agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := userText(tc.err); got != tc.want {
				t.Errorf("userText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestJobCommand: every scheduler hint names its /cron command (the
// scheduler's notices are rendered with it too).
func TestJobCommand(t *testing.T) {
	for h, want := range map[scheduler.Hint]string{
		scheduler.HintListJobs:  "`/cron list`",
		scheduler.HintJobRuns:   "`/cron runs j1`",
		scheduler.HintRunJob:    "`/cron run j1`",
		scheduler.HintRemoveJob: "`/cron remove j1`",
		scheduler.HintNone:      "",
	} {
		if got := JobCommand(h, "j1"); got != want {
			t.Errorf("JobCommand(%q) = %q, want %q", h, got, want)
		}
	}
}
