package bot

import (
	"strings"
	"testing"
)

// TestE2EJobHintsPerReader (issue 18): the scheduler names no command;
// each boundary renders its hint for its reader. The slash reply to an
// unknown job id reads exactly as before ("`/cron list` shows the job
// ids"), while the model's cancel_job tool is pointed at its list_jobs
// tool. On the old code the model was told about `/cron list`, a command
// it cannot run.
func TestE2EJobHintsPerReader(t *testing.T) {
	t.Parallel()
	w := authzStart(t, nil)
	const slash = "⚠️ there is no job \"nope\": `/cron list` shows the job ids"
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("remove", opt("id", "nope"))); got.Content != slash {
		t.Errorf("/cron remove of an unknown id answered %q, want %q", got.Content, slash)
	}
	r := w.replyTo(t, w.say(t, w.general.ID, w.alice.ID, "stop it\n!tool cancel_job {\"id\":\"nope\"}"))
	const tool = "cancel_job: error: remove job nope: there is no job \"nope\": list_jobs shows the job ids"
	if !strings.Contains(r.Content, tool) || strings.Contains(r.Content, "/cron") {
		t.Errorf("cancel_job of an unknown id told the model %q, want %q and no slash command", r.Content, tool)
	}
	finishBot(t, w.harness, w.general.ID)
}
