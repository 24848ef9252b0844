package main

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestCommandErrorBoundary (one rule for user-facing errors): a
// scheduler error written for the user (an unknown job id) is shown as
// it is; an internal one (its store closed under it) reaches the user as
// the generic text, none of its own words, and is logged exactly once. On
// the old code the internal error's text was shown ("the scheduler failed
// (list jobs: ...)") and nothing was logged.
func TestCommandErrorBoundary(t *testing.T) {
	t.Parallel()
	logs := newLogSink()
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	cron := func(sub string, opts ...discordtest.CommandOption) string {
		t.Helper()
		return adResponded(t, h, adInvoke(t, h, h.general.ID, "cron", adOpt(sub, opts))).Content
	}
	if got := cron("remove", adOpt("id", "nope")); !strings.Contains(got, `there is no job "nope"`) {
		t.Fatalf("/cron remove of an unknown id answered %q, want the scheduler's own words", got)
	}
	if err := h.app.store.Close(); err != nil {
		t.Fatal(err)
	}
	const generic = "⚠️ Something went wrong; the bot logged the details."
	if got := cron("list"); got != generic {
		t.Fatalf("/cron list with its store closed answered %q, want %q", got, generic)
	}
	var failed []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "slash command failed") {
			failed = append(failed, line)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "list jobs") {
		t.Fatalf("log lines for the failure: %q, want exactly one naming the operation", failed)
	}
}
