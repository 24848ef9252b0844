package scheduler_test

import (
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
