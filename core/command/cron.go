package command

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/scheduler"
)

// Jobs is the scheduler surface behind /cron: it does what was asked and
// returns what happened; /cron's replies are worded here. Errors are
// user-facing when they say so (UserMessage, a refusal). Each call carries
// the invoker: Jobs applies the authority rule (core/authz), the same one
// the model's job tools go through (invariant 13).
type Jobs interface {
	Add(ctx context.Context, actor authz.Actor, req CronAdd) (scheduler.Job, error)
	List(ctx context.Context, actor authz.Actor) ([]scheduler.Job, error)
	// Operable lists the jobs actor may remove and run (/cron remove|run's
	// rule: an operator of the job's server).
	Operable(ctx context.Context, actor authz.Actor) ([]scheduler.Job, error)
	Remove(ctx context.Context, actor authz.Actor, id string) error
	RunNow(ctx context.Context, actor authz.Actor, id string) (scheduler.Run, error)
	Runs(ctx context.Context, actor authz.Actor, id string) ([]scheduler.Run, error)
	// Describe says when and where a job runs, in the bot's time zone.
	Describe(j scheduler.Job) string
}

// CronAdd is a /cron add invocation.
type CronAdd struct {
	Schedule, Prompt, Target, TZ, To string
	CreatedBy                        string
	CreatedIn                        binding.ConversationRef
}

var cronSubs = []string{"add", "list", "remove", "run", "runs"}

func (c *Commands) cron(ctx context.Context, v Invocation) (Reply, error) {
	if c.d.Jobs == nil {
		return Reply{}, userErrf("The scheduler is disabled (scheduler.enabled: false).")
	}
	if !slices.Contains(cronSubs, v.Sub) {
		return Reply{}, userErrf("Usage: %s", v.Platform.Command("cron", strings.Join(cronSubs, "|")))
	}
	// Who may do what is decided behind Jobs, by the same rule the model's
	// job tools go through (core/authz via the scheduler bridge).
	text, err := cronRun(ctx, c.d.Jobs, v)
	if authz.IsRefusal(err) {
		return Reply{}, userErrf("%s", Refusal(err))
	}
	if err != nil {
		return Reply{}, fmt.Errorf("%s: %w", v.Platform.Command("cron", v.Sub), err)
	}
	return Reply{Text: text, Public: slices.Contains([]string{"add", "remove", "run"}, v.Sub)}, nil
}

// cronRun runs a /cron sub-command and words its reply.
func cronRun(ctx context.Context, jobs Jobs, v Invocation) (string, error) {
	id := v.Str("id")
	actor := v.actor()
	switch v.Sub {
	case "add":
		j, err := jobs.Add(ctx, actor, CronAdd{Schedule: v.Str("schedule"), Prompt: v.Str("prompt"), Target: v.Str("target"), TZ: v.Str("tz"), To: v.Str("to"),
			CreatedBy: v.UserID, CreatedIn: v.Conversation})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("⏰ Job `%s` added (%s): %s", j.ID, j.Mode(), jobs.Describe(j)), nil
	case "list":
		list, err := jobs.List(ctx, actor)
		if err != nil {
			return "", err
		}
		if v.Platform.PublicReplies {
			var own []scheduler.Job
			for _, j := range list {
				if ownRoom(j, v.Conversation) {
					own = append(own, j)
				}
			}
			list = own
		}
		return cronList(jobs, list, v.Platform), nil
	case "remove":
		if err := jobs.Remove(ctx, actor, id); err != nil {
			return "", err
		}
		return fmt.Sprintf("🗑️ Job `%s` removed.", id), nil
	case "run":
		r, err := jobs.RunNow(ctx, actor, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("▶️ Job `%s` ran: %s (delivery %s).", id, r.Status, r.Delivery.Status), nil
	default: // runs
		runs, err := jobs.Runs(ctx, actor, id)
		if err != nil {
			return "", err
		}
		return cronRunList(id, runs), nil
	}
}

// ownRoom reports whether a job belongs to conv's room alone: it was made
// in it and posts into it (a thread counts as its room). A listing shown
// to everyone in a room holds only such jobs, never another room's or a
// DM's prompts.
func ownRoom(j scheduler.Job, conv binding.ConversationRef) bool {
	room := func(c binding.ConversationRef) string {
		c = c.Normalize()
		if c.ParentConversationID != "" {
			return c.Channel + "/" + c.ParentConversationID
		}
		return c.Channel + "/" + c.ConversationID
	}
	to, err := scheduler.DeliveryTarget(j)
	return err == nil && j.CreatedIn.Valid() && room(j.CreatedIn) == room(conv) && room(to) == room(conv)
}

// cronList is /cron list's reply.
func cronList(jobs Jobs, list []scheduler.Job, p Platform) string {
	if len(list) == 0 {
		return "No jobs. Add one with " + p.Command("cron", "add") + "."
	}
	var sb strings.Builder
	for _, j := range list {
		state := "enabled"
		if !j.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(&sb, "• `%s` %s (%s, %s): %s\n", j.ID, j.Name, j.Mode(), state, jobs.Describe(j))
	}
	return sb.String()
}

// cronRunList is /cron runs' reply (the runs newest first, as Jobs returns them).
func cronRunList(id string, runs []scheduler.Run) string {
	if len(runs) == 0 {
		return fmt.Sprintf("Job `%s` has not run yet.", id)
	}
	var sb strings.Builder
	for _, r := range runs {
		late := ""
		if r.Late {
			late = " (late by " + scheduler.HumanDuration(r.LateBy) + ")"
		}
		fmt.Fprintf(&sb, "• %s %s%s — delivery %s %s\n", r.StartedAt.UTC().Format("2006-01-02 15:04"), r.Status, late, r.Delivery.Status, r.Error)
	}
	return sb.String()
}
