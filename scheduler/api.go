package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// AddRequest is a new job as a surface (slash command, model tool) asks for it.
type AddRequest struct {
	Name     string // optional; derived from the prompt when empty
	Schedule string // cron expression, "every 10m" or "at <RFC 3339>"
	Prompt   string
	Target   string // main | isolated | current | session:<key>; "" = main (isolated when To is elsewhere)
	TZ       string // IANA zone; "" = the scheduler's timezone
	To       string // channel:<id> | user:<id>; "" = the job's own chat
	// CreatedBy is the user id of the creator; CreatedIn the conversation
	// the job was created in (it owns the job).
	CreatedBy string
	CreatedIn binding.ConversationRef
	AgentID   string
}

// Add validates and stores a new job. Validation problems are *UserError
// values to show as is. The job's mode is fixed here (Job.Mode).
func (s *Scheduler) Add(ctx context.Context, req AddRequest) (Job, error) {
	now := s.clk.Now()
	prompt := strings.TrimSpace(req.Prompt)
	if prompt == "" {
		return Job{}, userErrorf("the prompt is empty: write what the agent should do at each run, e.g. `summarise today's open issues`")
	}
	sched, err := ParseSchedule(req.Schedule, s.loc, req.TZ, now)
	if err != nil {
		return Job{}, err
	}
	target, mode, err := resolveTarget(req.Target, strings.TrimSpace(req.To), req.CreatedIn)
	if err != nil {
		return Job{}, err
	}
	agent := req.AgentID
	if agent == "" {
		agent = s.opt.DefaultAgent
	}
	j := Job{
		ID: s.d.NewID(), Name: jobName(req.Name, prompt), AgentID: agent, Schedule: sched.Spec(), Prompt: prompt,
		Target: target, To: strings.TrimSpace(req.To), StoredMode: mode, CreatedBy: req.CreatedBy,
		CreatedIn: req.CreatedIn.Normalize(), CreatedAt: now, Enabled: true,
	}
	if j.To != "" {
		ref, _ := ParseTo(j.To, j.CreatedIn)
		j.To = FormatTo(ref)
	}
	j.State.NextRunAt = sched.Next(now)
	if target == TargetCurrent {
		if s.d.History == nil {
			return Job{}, userErrorf("target `current` is not available here (no chat history to snapshot): use `isolated`")
		}
		key, _, _ := sessionkey.Route(s.d.Routes, agent, j.CreatedIn)
		seed, err := s.d.History.History(ctx, key, s.opt.SnapshotSize)
		if err != nil {
			return Job{}, fmt.Errorf("snapshot %s for target current: %w", key, err)
		}
		j.Seed = slices.Clone(seed)
		if j.Seed == nil {
			j.Seed = []transcript.Entry{}
		}
	}
	for i := 0; ; i++ {
		_, taken, err := s.st.Job(ctx, j.ID)
		if err != nil {
			return Job{}, err
		}
		if !taken {
			break
		}
		if i == 8 {
			return Job{}, fmt.Errorf("no free job id after %d tries", i)
		}
		j.ID = s.d.NewID()
	}
	if err := s.st.PutJob(ctx, j); err != nil {
		return Job{}, fmt.Errorf("save job: %w", err)
	}
	s.track(j)
	s.log.Info().Str("job", j.ID).Str("mode", string(j.Mode())).Str("target", j.Target).Str("schedule", j.Schedule.Text).Msg("job added")
	return j, nil
}

func jobName(name, prompt string) string {
	if name = strings.TrimSpace(name); name != "" {
		return name
	}
	name = strings.Join(strings.Fields(prompt), " ")
	if r := []rune(name); len(r) > 40 {
		name = string(r[:40]) + "…"
	}
	return name
}

// Remove deletes a job, its run history and its ledger.
func (s *Scheduler) Remove(ctx context.Context, id string) error {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	if _, ok, err := s.st.Job(ctx, id); err != nil {
		return err
	} else if !ok {
		return notFound(id)
	}
	if err := s.st.DeleteJob(ctx, id); err != nil {
		return fmt.Errorf("remove job %s: %w", id, err)
	}
	s.untrack(id)
	return nil
}

// List returns every job ordered by id.
func (s *Scheduler) List(ctx context.Context) ([]Job, error) { return s.st.Jobs(ctx) }

// Get returns one job.
func (s *Scheduler) Get(ctx context.Context, id string) (Job, error) {
	j, ok, err := s.st.Job(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if !ok {
		return Job{}, notFound(id)
	}
	return j, nil
}

// RunNow runs a job immediately (also a disabled one: an operator asked)
// and returns the finished run. It claims no scheduled instant; a failure
// counts like any other. A job already running returns ErrBusy in a *UserError.
func (s *Scheduler) RunNow(ctx context.Context, id string) (Run, error) {
	if !s.acquire(id) {
		return Run{}, &UserError{Msg: fmt.Sprintf("job %s is running right now; try again when it finished", id), Err: ErrBusy, Hint: HintJobRuns, JobID: id}
	}
	defer s.release(id)
	j, err := s.Get(ctx, id)
	if err != nil {
		return Run{}, err
	}
	sched, err := FromSpec(j.Schedule)
	if err != nil {
		return Run{}, fmt.Errorf("job %s: %w", id, err)
	}
	return s.execute(ctx, j, sched, time.Time{}, TriggerManual, 0)
}

// Runs returns up to limit runs of a job, newest first.
func (s *Scheduler) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	return s.st.Runs(ctx, id, limit)
}

// Describe tells a user what a job does and when: its schedule in words,
// the next run in the job's zone, its mode and where it posts.
func (s *Scheduler) Describe(j Job) string { return Describe(j, s.loc) }

// Describe is Scheduler.Describe with an explicit default zone.
func Describe(j Job, defaultTZ *time.Location) string {
	loc := defaultTZ
	if l, err := time.LoadLocation(j.Schedule.TZ); err == nil && j.Schedule.TZ != "" {
		loc = l
	}
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (`%s`): %s", j.Name, j.ID, ScheduleWords(j.Schedule, loc))
	switch {
	case !j.Enabled && j.State.DisabledReason == DisabledCompleted:
		b.WriteString("; done (it ran)")
	case !j.Enabled:
		fmt.Fprintf(&b, "; off (%s)", orDefault(j.State.DisabledReason, "disabled"))
	case !j.State.NextRunAt.IsZero():
		fmt.Fprintf(&b, "; next run %s", j.State.NextRunAt.In(loc).Format("Mon 2006-01-02 15:04 MST"))
	}
	b.WriteString(". ")
	if j.Mode() == ModeInChat {
		chat, _ := chatOf(j)
		fmt.Fprintf(&b, "In-chat: runs as a turn in %s and posts only there.", mention(chat))
	} else {
		var how string
		switch {
		case j.Target == TargetCurrent:
			how = "a fresh session seeded with the creating chat's history at creation"
		case strings.HasPrefix(j.Target, SessionTargetPrefix):
			how = "its own fresh session (not " + strings.TrimPrefix(j.Target, SessionTargetPrefix) + ")"
		default:
			how = "a fresh session each run"
		}
		to, err := DeliveryTarget(j)
		where := "its target"
		if err == nil {
			where = mention(to)
		}
		fmt.Fprintf(&b, "Background: runs in %s; only the result is posted to %s.", how, where)
	}
	if j.State.LastStatus != "" {
		fmt.Fprintf(&b, " Last run: %s", j.State.LastStatus)
		if j.State.ConsecutiveFailures > 0 {
			fmt.Fprintf(&b, " (%d failures in a row)", j.State.ConsecutiveFailures)
		}
		b.WriteString(".")
	}
	return b.String()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func mention(ref binding.ConversationRef) string {
	n := ref.Normalize()
	if n.Channel == sessionkey.PlatformMatrix {
		// Matrix has no mention markup for rooms: its target reads back.
		return "`" + sessionkey.FormatMatrixTarget(n) + "`"
	}
	id := n.ConversationID
	if u, ok := strings.CutPrefix(id, sessionkey.DMPrefix); ok {
		return "the DM with <@" + u + ">"
	}
	if id == "" {
		return "its chat"
	}
	return "<#" + id + ">"
}

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// ScheduleWords describes a schedule: "every 10m", "once at 2026-05-01 09:00 CEST",
// "every day at 09:30 (Europe/Berlin)", "at 09:30 on Monday (UTC)", or the
// cron expression with its zone.
func ScheduleWords(sp ScheduleSpec, loc *time.Location) string {
	switch sp.Kind {
	case KindEvery:
		return "every " + shortDuration(sp.Every)
	case KindAt:
		return "once at " + sp.At.In(loc).Format("2006-01-02 15:04 MST")
	}
	f := strings.Fields(sp.Expr)
	zone := " (" + loc.String() + ")"
	if len(f) == 5 && isNum(f[0]) && isNum(f[1]) && f[2] == "*" && f[3] == "*" {
		at := fmt.Sprintf("%s:%s", pad2(f[1]), pad2(f[0]))
		switch {
		case f[4] == "*":
			return "every day at " + at + zone
		case f[4] == "1-5":
			return "weekdays at " + at + zone
		case isNum(f[4]) && len(f[4]) == 1 && f[4][0] <= '6':
			return "every " + weekdays[f[4][0]-'0'] + " at " + at + zone
		}
	}
	if len(f) == 5 && isNum(f[0]) && f[1] == "*" && f[2] == "*" && f[3] == "*" && f[4] == "*" {
		return "every hour at minute " + f[0] + zone
	}
	return "cron `" + sp.Expr + "`" + zone
}

func isNum(s string) bool { return isID(s) && len(s) <= 2 }

func pad2(s string) string {
	if len(s) == 1 {
		return "0" + s
	}
	return s
}
