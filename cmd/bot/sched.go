package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
)

// schedulerBridge connects the scheduler to the rest: it runs job turns
// and background runs through the session manager, and serves /cron and
// the model's job tools from the scheduler's API.
type schedulerBridge struct {
	*scheduler.Scheduler
	sessions *session.Manager
}

var (
	_ scheduler.ChatRunner       = (*schedulerBridge)(nil)
	_ scheduler.BackgroundRunner = (*schedulerBridge)(nil)
	_ discord.Jobs               = (*schedulerBridge)(nil)
	_ session.Jobs               = (*schedulerBridge)(nil)
)

func newSchedulerBridge(a *app) (*schedulerBridge, error) {
	b := &schedulerBridge{sessions: a.sessions}
	b.Scheduler = scheduler.New(scheduler.Config{
		Store: a.store, Clock: a.clock, Runner: b, Background: b, Deliverer: a.outbound, Outbox: a.store,
		History: a.transcripts, Routes: a.bindings, Log: a.log.With().Str("component", "scheduler").Logger(),
		Settings: a.cfg.Scheduler, DefaultAgent: a.cfg.Agents[0].ID,
	})
	return b, nil
}

// RunJobTurn implements scheduler.ChatRunner (Rule 2, in-chat).
//
// Once queued, the turn runs to its end even when the bot is stopping
// (sessions drain after the scheduler stopped), so the run waits for it:
// giving up on ctx would record a run whose trigger and reply were
// displayed as failed, and count it towards failure alerts.
//
// A turn whose model call failed displays a notice instead of a reply and
// reports no error; the run failed all the same (failure alerts, backoff),
// so it is returned as an error along with what was displayed.
func (b *schedulerBridge) RunJobTurn(ctx context.Context, in scheduler.InChatRun) ([]string, error) {
	wctx := context.WithoutCancel(ctx)
	ids, err := b.sessions.RunJobTurn(wctx, session.JobTurn{Conversation: in.Conversation, DeliveryID: "job:" + in.JobID + ":run:" + in.RunID,
		Trigger: in.Trigger, Meta: in.Meta})
	if errors.Is(err, session.ErrTurnFailed) {
		return ids, fmt.Errorf("%w: %w", scheduler.ErrTurnFailed, err)
	}
	return ids, err
}

// RunBackground implements scheduler.BackgroundRunner (Rule 2, background).
func (b *schedulerBridge) RunBackground(ctx context.Context, in scheduler.BackgroundRun) (string, error) {
	return b.sessions.RunBackground(ctx, in.AgentID, in.SessionKey, in.Prompt, in.Seed)
}

// userText turns scheduler errors into what a user reads.
func userText(err error) error {
	var ue *scheduler.UserError
	if errors.As(err, &ue) {
		return errors.New(ue.Msg)
	}
	return fmt.Errorf("the scheduler failed (%v); the bot logged the details", err)
}

// Add implements /cron add.
func (b *schedulerBridge) Add(ctx context.Context, req discord.CronAdd) (string, error) {
	j, err := b.Scheduler.Add(ctx, scheduler.AddRequest{Schedule: req.Schedule, Prompt: req.Prompt, Target: req.Target, TZ: req.TZ, To: req.To,
		CreatedBy: req.CreatedBy, CreatedIn: req.CreatedIn})
	if err != nil {
		return "", userText(err)
	}
	return fmt.Sprintf("⏰ Job `%s` added (%s): %s", j.ID, j.Mode(), b.Describe(j)), nil
}

// List implements /cron list.
func (b *schedulerBridge) List(ctx context.Context, conv binding.ConversationRef) (string, error) {
	jobs, err := b.Scheduler.List(ctx)
	if err != nil {
		return "", userText(err)
	}
	if len(jobs) == 0 {
		return "No jobs. Add one with /cron add.", nil
	}
	var sb strings.Builder
	for _, j := range jobs {
		state := "enabled"
		if !j.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(&sb, "• `%s` %s (%s, %s): %s\n", j.ID, j.Name, j.Mode(), state, b.Describe(j))
	}
	return sb.String(), nil
}

// Remove implements /cron remove.
func (b *schedulerBridge) Remove(ctx context.Context, id string) (string, error) {
	if err := b.Scheduler.Remove(ctx, id); err != nil {
		return "", userText(err)
	}
	return fmt.Sprintf("🗑️ Job `%s` removed.", id), nil
}

// RunNow implements /cron run.
func (b *schedulerBridge) RunNow(ctx context.Context, id string) (string, error) {
	r, err := b.Scheduler.RunNow(ctx, id)
	if err != nil {
		return "", userText(err)
	}
	return fmt.Sprintf("▶️ Job `%s` ran: %s (delivery %s).", id, r.Status, r.Delivery.Status), nil
}

// Runs implements /cron runs.
func (b *schedulerBridge) Runs(ctx context.Context, id string) (string, error) {
	runs, err := b.Scheduler.Runs(ctx, id, 10)
	if err != nil {
		return "", userText(err)
	}
	if len(runs) == 0 {
		return fmt.Sprintf("Job `%s` has not run yet.", id), nil
	}
	var sb strings.Builder
	for _, r := range runs {
		late := ""
		if r.Late {
			late = " (late by " + scheduler.HumanDuration(r.LateBy) + ")"
		}
		fmt.Fprintf(&sb, "• %s %s%s — delivery %s %s\n", r.StartedAt.UTC().Format("2006-01-02 15:04"), r.Status, late, r.Delivery.Status, r.Error)
	}
	return sb.String(), nil
}

// ScheduleJob implements the schedule_job tool: the job belongs to the chat.
func (b *schedulerBridge) ScheduleJob(ctx context.Context, req session.JobRequest) (string, error) {
	j, err := b.Scheduler.Add(ctx, scheduler.AddRequest{Schedule: req.Schedule, Prompt: req.Prompt, Target: req.Target, To: req.To,
		CreatedBy: req.CreatedBy, CreatedIn: req.CreatedIn, AgentID: req.AgentID})
	if err != nil {
		return "", userText(err)
	}
	return fmt.Sprintf("job %s scheduled (%s): %s", j.ID, j.Mode(), b.Describe(j)), nil
}

// ListJobs implements the list_jobs tool.
func (b *schedulerBridge) ListJobs(ctx context.Context, conv binding.ConversationRef) (string, error) {
	return b.List(ctx, conv)
}

// CancelJob implements the cancel_job tool.
func (b *schedulerBridge) CancelJob(ctx context.Context, _ binding.ConversationRef, id string) (string, error) {
	return b.Remove(ctx, id)
}
