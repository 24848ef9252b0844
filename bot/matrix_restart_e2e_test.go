package bot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMatrixE2ECommandRunsOnceAfterRestart (issue 27.7, a real restart): the
// bot is stopped after a `!cron add` ran and started again on the same
// store with its /sync token rewound to before the command (a crash between
// the command's effect and the token's save), so the homeserver hands the
// command event again. It runs once: one job in the store, one reply in the
// room, and Rule 1 holds.
func TestMatrixE2ECommandRunsOnceAfterRestart(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	dir := t.TempDir()
	token := filepath.Join(dir, "matrix-sync.token")
	run := func() *harness { return runMatrixBotIn(t, w, dir, token) }
	first := run()
	waitFor(t, "the first /sync", func() bool { _, err := os.Stat(token); return err == nil })
	before, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	id := jobID(t, w.command(t, w.room, `!cron add compile the digest schedule="every 1h" target=isolated`, "added"))
	if err := first.close(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := os.WriteFile(token, before, 0o600); err != nil { // the token as it was before the command
		t.Fatal(err)
	}
	second := run()
	// A later command in the same room is handled after the replayed one.
	w.command(t, w.room, "!cron list", id)
	jobs, err := second.app.store.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Errorf("%d jobs after the replayed !cron add, want 1: %+v", len(jobs), jobs)
	}
	added := 0
	for _, m := range w.botReplies(t, w.room, w.room) {
		if strings.Contains(m.Content, "added") {
			added++
		}
	}
	if added != 1 {
		t.Errorf("the !cron add reply is displayed %d times, want once", added)
	}
	finishMatrixBot(t, second, w, []string{w.room})
}
