package bot

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/scheduler"
)

// brokenJobs is a job store whose listing fails, once broken is set, as a
// damaged store would.
type brokenJobs struct {
	scheduler.Store
	broken *atomic.Bool
}

func (b brokenJobs) Jobs(ctx context.Context) ([]scheduler.Job, error) {
	if b.broken.Load() {
		return nil, errors.New("jobs bucket: page 12 is corrupt")
	}
	return b.Store.Jobs(ctx)
}

// TestCommandErrorBoundary (one rule for user-facing errors): a
// scheduler error written for the user (an unknown job id) is shown as
// it is; an internal one (its job store fails) reaches the user as the
// generic text, none of its own words, and is logged exactly once. On the
// old code the internal error's text was shown ("the scheduler failed
// (... page 12 is corrupt)") and nothing was logged.
func TestCommandErrorBoundary(t *testing.T) {
	t.Parallel()
	logs := newLogSink()
	var broken atomic.Bool
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.New(logs), Prepare: func(a *App) {
		// The same scheduler over a store whose job listing fails.
		a.sched.Scheduler = scheduler.New(scheduler.Options{Settings: schedulerSettings(a.cfg.Scheduler), DefaultAgent: a.cfg.Agents[0].ID},
			scheduler.Deps{Store: brokenJobs{a.store, &broken}, Clock: a.clock, Runner: a.sched, Background: a.sched, Deliverer: a.outbound,
				Outbox: a.store, History: a.transcripts, Routes: a.bindings, Log: a.log, Authorizer: a.sched, Hints: jobHints(a.platforms)})
	}})
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
	broken.Store(true)
	const generic = "⚠️ Something went wrong; the bot logged the details."
	if got := cron("list"); got != generic {
		t.Fatalf("/cron list with its job store failing answered %q, want %q", got, generic)
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
