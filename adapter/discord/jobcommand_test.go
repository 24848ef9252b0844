package discord

import (
	"testing"

	"github.com/agentbot/agentbot/scheduler"
)

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
		if got := CommandPlatform(false).JobCommand(h, "j1"); got != want {
			t.Errorf("JobCommand(%q) = %q, want %q", h, got, want)
		}
	}
}
