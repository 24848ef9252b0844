package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/tools/mcp"
)

// schedulerBridge connects the scheduler to the rest: it runs job turns
// and background runs through the session manager, and serves /cron and
// the model's job tools from the scheduler's API.
type schedulerBridge struct {
	*scheduler.Scheduler
	sessions func() *session.Manager // built after the bridge: it offers the model job tools
	auth     *authz.Authority
	routes   *agentroute.Table // a job's agent is its chat's (agents[].channels)
}

var (
	_ scheduler.ChatRunner       = (*schedulerBridge)(nil)
	_ scheduler.BackgroundRunner = (*schedulerBridge)(nil)
	_ command.Jobs               = (*schedulerBridge)(nil)
	_ session.Jobs               = (*schedulerBridge)(nil)
	_ scheduler.Authorizer       = (*schedulerBridge)(nil)
)

func newSchedulerBridge(a *App) *schedulerBridge {
	b := &schedulerBridge{sessions: func() *session.Manager { return a.sessions }, auth: a.auth, routes: a.routes}
	b.Scheduler = scheduler.New(scheduler.Options{
		Settings: schedulerSettings(a.cfg.Scheduler), DefaultAgent: a.cfg.Agents[0].ID,
	}, scheduler.Deps{
		Store: a.store, Clock: a.clock, Runner: b, Background: b, Deliverer: a.outbound, Outbox: a.store,
		History: a.transcripts, Routes: a.bindings, Log: a.log.With().Str("component", "scheduler").Logger(), Authorizer: b,
		Hints: jobHints(a.platforms),
		Tools: toolHealth(a.tools),
	})
	return b
}

// jobHints is the scheduler's view of the platform table: each platform's
// command wording names the command a hint stands for.
func jobHints(t *platform.Table) scheduler.HintsByPlatform {
	hints := scheduler.HintsByPlatform{}
	for _, p := range t.All() {
		hints[p.Name] = p.Commands.JobCommand
	}
	return hints
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
	ids, err := b.sessions().RunJobTurn(wctx, session.JobTurn{Conversation: in.Conversation, DeliveryID: "job:" + in.JobID + ":run:" + in.RunID,
		Trigger: in.Trigger, Meta: in.Meta, CreatedBy: in.CreatedBy})
	if errors.Is(err, session.ErrTurnFailed) {
		return ids, fmt.Errorf("%w: %w", scheduler.ErrTurnFailed, err)
	}
	return ids, err
}

// schedulerSettings maps the config's scheduler section onto the
// scheduler's options (the scheduler does not read the config).
func schedulerSettings(c config.SchedulerConfig) scheduler.Settings {
	return scheduler.Settings{Enabled: c.Enabled, Location: c.Location(), CatchUpMissed: c.CatchUpMissed, MaxCatchUp: c.MaxCatchUp,
		FailureAlert: scheduler.FailureAlert{After: c.FailureAlert.After, Cooldown: c.FailureAlert.Cooldown}, RunRetention: c.RunRetention}
}

// RunBackground implements scheduler.BackgroundRunner (Rule 2, background).
func (b *schedulerBridge) RunBackground(ctx context.Context, in scheduler.BackgroundRun) (string, error) {
	return b.sessions().RunBackground(ctx, session.BackgroundRun{AgentID: in.AgentID, Key: in.SessionKey, Prompt: in.Prompt, Seed: in.Seed,
		CreatedBy: in.CreatedBy, Conversation: in.Conversation, Run: "job:" + in.JobID + ":run:" + in.RunID})
}

// The rules of /cron, in one place: the slash command and the model's job
// tools (schedule_job, list_jobs, cancel_job) both call these, with the
// invoker or the user the turn acts for (invariant 13; power has a scope).
// A job's conversations are the one it was made in and the one it posts
// into; an operator OF THE JOB is an operator of one of them (its server's,
// or a configured operator user) and nobody for a job touching someone
// else's DM.
//   - add: an operator of the conversation it is made in; a job posts only
//     where its creator can view and send messages (its `to`, re-checked
//     before every run);
//   - remove, run: an operator of the job;
//   - list, runs: an operator of the job, or someone who can view both its
//     conversations (so a server's operator sees that server's jobs only).

// Add implements /cron add.
func (b *schedulerBridge) Add(ctx context.Context, actor authz.Actor, req command.CronAdd) (scheduler.Job, error) {
	return b.add(ctx, actor, scheduler.AddRequest{Schedule: req.Schedule, Prompt: req.Prompt, Target: req.Target, TZ: req.TZ, To: req.To,
		CreatedBy: req.CreatedBy, CreatedIn: req.CreatedIn})
}

func (b *schedulerBridge) add(ctx context.Context, actor authz.Actor, req scheduler.AddRequest) (scheduler.Job, error) {
	if err := b.auth.RequireOperator(ctx, actor, req.CreatedIn, "schedule jobs (/cron add)"); err != nil {
		return scheduler.Job{}, err
	}
	req.CreatedBy = actor.UserID
	if req.AgentID == "" {
		req.AgentID = b.routes.Agent(req.CreatedIn)
	}
	if strings.TrimSpace(req.To) != "" {
		to, err := scheduler.ParseTo(req.To, req.CreatedIn)
		if err != nil {
			return scheduler.Job{}, fmt.Errorf("job target: %w", err)
		}
		if err := b.auth.CanPost(ctx, actor.UserID, to); err != nil {
			return scheduler.Job{}, err
		}
	}
	j, err := b.Scheduler.Add(ctx, req)
	if err != nil {
		return scheduler.Job{}, fmt.Errorf("add job: %w", err)
	}
	// Wherever the job will post (a session:<key> target too), its
	// creator must be able to; a crash before the removal leaves a job
	// whose every run AuthorizeRun refuses.
	if err := b.AuthorizeRun(ctx, j); err != nil {
		if rerr := b.Scheduler.Remove(ctx, j.ID); rerr != nil {
			return scheduler.Job{}, fmt.Errorf("remove unauthorized job %s: %w", j.ID, rerr)
		}
		return scheduler.Job{}, err
	}
	return j, nil
}

// jobConversations are the conversations a job touches: the one it was
// made in and the one it posts into.
func jobConversations(j scheduler.Job) []binding.ConversationRef {
	var out []binding.ConversationRef
	if j.CreatedIn.Valid() {
		out = append(out, j.CreatedIn.Normalize())
	}
	if to, err := scheduler.DeliveryTarget(j); err == nil && (len(out) == 0 || to.Normalize().Key() != out[0].Key()) {
		out = append(out, to.Normalize())
	}
	return out
}

// jobOperator: the actor is an operator of one of the job's conversations
// and none of them is someone else's DM. A job without a conversation is
// the configured operator users' alone.
func (b *schedulerBridge) jobOperator(ctx context.Context, actor authz.Actor, j scheduler.Job) bool {
	convs := jobConversations(j)
	if len(convs) == 0 {
		return b.auth.Global(actor.UserID)
	}
	ok := false
	for _, c := range convs {
		if u := authz.DMUser(c); u != "" && u != actor.UserID {
			return false
		}
		ok = ok || b.auth.Operator(ctx, actor, c)
	}
	return ok
}

// requireJobOperator refuses unless the actor is an operator of the job; a
// job they may not even list is unknown to them. op names the operation in
// errors ("remove job x: ...").
func (b *schedulerBridge) requireJobOperator(ctx context.Context, actor authz.Actor, op, id, what string) error {
	j, err := b.Scheduler.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("%s job %s: %w", op, id, err)
	}
	if b.jobOperator(ctx, actor, j) {
		return nil
	}
	if !b.visible(ctx, actor, j) {
		return &authz.Refusal{Msg: fmt.Sprintf("there is no job %s you can see", id)}
	}
	return &authz.Refusal{Msg: fmt.Sprintf("only operators of the server job %s belongs to can %s", id, what)}
}

// visible: an operator of the job sees it; others only jobs made in, and
// posting into, conversations they can view.
func (b *schedulerBridge) visible(ctx context.Context, actor authz.Actor, j scheduler.Job) bool {
	if b.jobOperator(ctx, actor, j) {
		return true
	}
	if !j.CreatedIn.Valid() || b.auth.CanView(ctx, actor.UserID, j.CreatedIn) != nil {
		return false
	}
	to, err := scheduler.DeliveryTarget(j)
	return err == nil && b.auth.CanView(ctx, actor.UserID, to) == nil
}

// AuthorizeRun implements scheduler.Authorizer: before every run, the
// job's creator must still be able to view and send messages where it
// posts. A job stored without a creator (made before creators were
// recorded) may post only into the conversation it was made in.
func (b *schedulerBridge) AuthorizeRun(ctx context.Context, j scheduler.Job) error {
	to, err := scheduler.DeliveryTarget(j)
	if err != nil {
		return nil // the run fails on it with its own reason
	}
	if j.CreatedBy == "" {
		if to.Normalize().Key() == j.CreatedIn.Normalize().Key() {
			return nil
		}
		return &authz.Refusal{Msg: "the job has no recorded creator and posts outside the conversation it was made in; an operator must re-create it"}
	}
	if err := b.auth.CanPost(ctx, j.CreatedBy, to); err != nil {
		return fmt.Errorf("creator %s: %w", j.CreatedBy, err)
	}
	return nil
}

// List implements /cron list: the jobs the asker may see.
func (b *schedulerBridge) List(ctx context.Context, actor authz.Actor) ([]scheduler.Job, error) {
	all, err := b.Scheduler.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var jobs []scheduler.Job
	for _, j := range all {
		if b.visible(ctx, actor, j) {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// Operable lists the jobs the actor may remove and run (what /cron
// remove|run complete to).
func (b *schedulerBridge) Operable(ctx context.Context, actor authz.Actor) ([]scheduler.Job, error) {
	all, err := b.Scheduler.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var jobs []scheduler.Job
	for _, j := range all {
		if b.jobOperator(ctx, actor, j) {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// Remove implements /cron remove.
func (b *schedulerBridge) Remove(ctx context.Context, actor authz.Actor, id string) error {
	if err := b.requireJobOperator(ctx, actor, "remove", id, "remove it (/cron remove)"); err != nil {
		return err
	}
	if err := b.Scheduler.Remove(ctx, id); err != nil {
		return fmt.Errorf("remove job %s: %w", id, err)
	}
	return nil
}

// RunNow implements /cron run.
func (b *schedulerBridge) RunNow(ctx context.Context, actor authz.Actor, id string) (scheduler.Run, error) {
	if err := b.requireJobOperator(ctx, actor, "run", id, "run it (/cron run)"); err != nil {
		return scheduler.Run{}, err
	}
	r, err := b.Scheduler.RunNow(ctx, id)
	if err != nil {
		return scheduler.Run{}, fmt.Errorf("run job %s: %w", id, err)
	}
	return r, nil
}

// recentRuns is how many runs /cron runs shows.
const recentRuns = 10

// Runs implements /cron runs (newest first): a job the asker may not list
// is unknown to them.
func (b *schedulerBridge) Runs(ctx context.Context, actor authz.Actor, id string) ([]scheduler.Run, error) {
	j, err := b.Scheduler.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	if !b.visible(ctx, actor, j) {
		return nil, &authz.Refusal{Msg: fmt.Sprintf("there is no job %s you can see", id)}
	}
	runs, err := b.Scheduler.Runs(ctx, id, recentRuns)
	if err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	return runs, nil
}

// ScheduleJob implements the schedule_job tool: /cron add's rules, for
// the user the turn acts for; the job belongs to the chat.
func (b *schedulerBridge) ScheduleJob(ctx context.Context, actor authz.Actor, req session.JobRequest) (string, error) {
	j, err := b.add(ctx, actor, scheduler.AddRequest{Schedule: req.Schedule, Prompt: req.Prompt, Target: req.Target, To: req.To,
		CreatedBy: actor.UserID, CreatedIn: req.CreatedIn, AgentID: req.AgentID})
	if err != nil {
		return "", forModel(err)
	}
	return fmt.Sprintf("job %s scheduled (%s): %s", j.ID, j.Mode(), b.Describe(j)), nil
}

// ListJobs implements the list_jobs tool: /cron list's rules, in words
// for the model.
func (b *schedulerBridge) ListJobs(ctx context.Context, actor authz.Actor) (string, error) {
	jobs, err := b.List(ctx, actor)
	if err != nil || len(jobs) == 0 {
		return "no jobs", forModel(err)
	}
	var sb strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&sb, "job %s %q (%s, enabled: %t): %s\n", j.ID, j.Name, j.Mode(), j.Enabled, b.Describe(j))
	}
	return sb.String(), nil
}

// CancelJob implements the cancel_job tool: /cron remove's rules.
func (b *schedulerBridge) CancelJob(ctx context.Context, actor authz.Actor, id string) (string, error) {
	if err := b.Remove(ctx, actor, id); err != nil {
		return "", forModel(err)
	}
	return fmt.Sprintf("job %s removed", id), nil
}

// toolHealth is the hub as the scheduler's ToolHealth (nil without MCP
// servers: a nil *mcp.Hub must not become a non-nil interface).
func toolHealth(h *mcp.Hub) scheduler.ToolHealth {
	if h == nil {
		return nil
	}
	return h
}
