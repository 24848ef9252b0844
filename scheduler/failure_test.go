package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/scheduler"
)

func TestFailureSummaryNamesTheKindOnly(t *testing.T) {
	secret := "https://discord.com/api/webhooks/1/SECRET-TOKEN"
	gone := &delivery.FailedError{DeliveryID: "d", Err: fmt.Errorf("%w: discord code 50083 at %s", delivery.ErrDestinationGone, secret)}
	tests := []struct {
		err  error
		want string
	}{
		{&model.Error{Kind: model.KindServer, Provider: "openai", Status: 502, Err: errors.New(secret)}, "model error (server)"},
		{fmt.Errorf("%w: %w", scheduler.ErrTurnFailed, &model.Error{Kind: model.KindRateLimit, Err: errors.New(secret)}), "model error (rate-limit)"},
		{gone, "delivery failed: chat deleted, archived or locked"},
		{&delivery.FailedError{Err: fmt.Errorf("%w: %s", delivery.ErrForbidden, secret)}, "delivery failed: missing permission"},
		{&delivery.FailedError{Err: fmt.Errorf("%w: %s", delivery.ErrTransient, secret)}, "delivery failed: Discord did not confirm the send"},
		{&delivery.FailedError{Err: fmt.Errorf("send d: platform %q: %w (this process posts to: discord): %w", "slack", delivery.ErrUnknownPlatform, delivery.ErrRejected)},
			"delivery failed: this bot does not post to that chat platform"},
		{errors.New(secret), "internal error"},
		{nil, ""},
	}
	for _, tt := range tests {
		got := scheduler.FailureSummary(tt.err)
		if got != tt.want || strings.Contains(got, "SECRET") {
			t.Errorf("FailureSummary(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestBackgroundDeliveryFailureSummary: a failed background delivery is
// summarised by kind for alerts; the run keeps Discord's error text.
func TestBackgroundDeliveryFailureSummary(t *testing.T) {
	e := newEnv(t)
	e.out.setFail(fmt.Errorf("%w: discord code 50083: Thread is archived at https://discord.com/api/v9/channels/200/messages", delivery.ErrDestinationGone))
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "isolated", To: otherChannel})
	for range 2 {
		e.clk.Set(e.job(j.ID).State.NextRunAt)
		e.tick()
	}
	r := e.runs(j.ID)[0]
	if !strings.Contains(r.Error, "Thread is archived") || r.Summary != "delivery failed: chat deleted, archived or locked" {
		t.Fatalf("run error %q summary %q", r.Error, r.Summary)
	}
}

// TestRule1ExceptionIsARunDiagnostic: a job result displayed without a
// transcript entry (the chat is bound to another agent) is recorded with
// the run as a warn diagnostic with its reason.
func TestRule1ExceptionIsARunDiagnostic(t *testing.T) {
	e := newEnv(t)
	e.out.skip = delivery.SkipOtherAgent
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "isolated", To: otherChannel})
	e.clk.Set(e.job(j.ID).State.NextRunAt)
	e.tick()
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusOK || len(r.Diagnostics) != 1 {
		t.Fatalf("run %+v", r)
	}
	d := r.Diagnostics[0]
	if d.Level != "warn" || d.Reason != delivery.SkipOtherAgent || d.DeliveryID != "job:"+j.ID+":run:"+r.RunID || d.Detail == "" {
		t.Fatalf("diagnostic %+v", d)
	}
}

// downTools is a ToolHealth whose agents all have one server down.
type downTools map[string][]string

func (d downTools) Unavailable(_ context.Context, agentID string) []string { return d[agentID] }

// TestDownToolServerIsARunDiagnostic (issue 27.6): a run whose agent's MCP
// server is not up goes on without its tools and records which server was
// down and why, in-chat and background alike; an agent whose servers are up
// records nothing.
func TestDownToolServerIsARunDiagnostic(t *testing.T) {
	for _, target := range []string{"main", "isolated"} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t)
			e.tools = downTools{"main": {"files: failing: exec: npx: not found"}}
			e.s = e.newScheduler()
			j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: target})
			e.clk.Set(e.job(j.ID).State.NextRunAt)
			e.tick()
			r := e.runs(j.ID)[0]
			if r.Status != scheduler.StatusOK || len(r.Diagnostics) != 1 {
				t.Fatalf("run %+v, want ok with one diagnostic", r)
			}
			d := r.Diagnostics[0]
			if d.Level != delivery.DiagnosticWarn || d.Reason != scheduler.ReasonToolsUnavailable ||
				!strings.Contains(d.Detail, "files: failing: exec: npx: not found") {
				t.Fatalf("diagnostic %+v", d)
			}
		})
	}
	e := newEnv(t)
	e.tools = downTools{"other": {"x: failing: boom"}}
	e.s = e.newScheduler()
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "isolated"})
	e.clk.Set(e.job(j.ID).State.NextRunAt)
	e.tick()
	if r := e.runs(j.ID)[0]; len(r.Diagnostics) != 0 {
		t.Fatalf("diagnostics %+v for an agent whose servers are up", r.Diagnostics)
	}
}
