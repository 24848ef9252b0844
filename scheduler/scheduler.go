package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// InChatRun is one run of an in-chat job, handed to the session layer.
type InChatRun struct {
	JobID   string
	JobName string
	RunID   string
	AgentID string
	// DeliveryID is unique per run: job:<jobID>:run:<runID> (the trigger
	// and reply deliveries derive their ids from it).
	DeliveryID string
	// Conversation is the chat the job belongs to; the turn runs in the
	// session it routes to (sessionkey.Route) and posts only there.
	Conversation binding.ConversationRef
	// SessionKey is the chat's own session key (sessionkey.ForConversation,
	// or the key of a session:<key> target).
	SessionKey string
	Prompt     string
	// Trigger is the visible line to post before the turn:
	// "⏰ <job name>: <prompt>", with " (late by 3h)" after the name when late.
	Trigger string
	// Meta names the job for the trigger and reply entries (jobId, jobName,
	// schedule, runId, and late when late), so the model sees which job posted.
	Meta        map[string]string
	ScheduledAt time.Time
	Late        bool
	LateBy      time.Duration
	// CreatedBy is the job's creator: the turn's tools act with their
	// authority (invariant 13).
	CreatedBy string
}

// Authorizer re-checks, at run time, that a job's creator may still have
// it post where it posts (invariant 13); an error fails the run with its
// text, and nothing is run or posted.
type Authorizer interface {
	AuthorizeRun(ctx context.Context, j Job) error
}

// ChatRunner runs in-chat job turns (implemented by the session layer).
// RunJobTurn posts in.Trigger into in.Conversation through Outbound, then
// runs a turn with in.Prompt in that chat's session, serialized with user
// turns, and returns the Discord message ids of what it displayed (trigger
// and reply). The scheduler writes no transcript entry itself.
type ChatRunner interface {
	RunJobTurn(ctx context.Context, in InChatRun) (messageIDs []string, err error)
}

// ErrTurnFailed wraps a RunJobTurn error when the turn failed (e.g. the
// model call) but its trigger and a failure notice were displayed; the ids
// returned with it are what was displayed.
var ErrTurnFailed = errors.New("the job's turn failed")

// ChatRunnerFunc adapts a function to ChatRunner (wiring helper).
type ChatRunnerFunc func(ctx context.Context, in InChatRun) ([]string, error)

// RunJobTurn calls f.
func (f ChatRunnerFunc) RunJobTurn(ctx context.Context, in InChatRun) ([]string, error) {
	return f(ctx, in)
}

// BackgroundRun is one run of a background job.
type BackgroundRun struct {
	JobID   string
	RunID   string
	AgentID string
	// SessionKey is the run's own fresh session (sessionkey.CronRun); it is
	// no chat's session.
	SessionKey string
	Prompt     string
	// Seed is the creating chat's history snapshot (target current), to be
	// given to the model before Prompt. Nil for other targets.
	Seed []transcript.Entry
	// CreatedBy is the job's creator, whose usage budget the run spends;
	// Conversation is where it posts (its server's budget).
	CreatedBy    string
	Conversation binding.ConversationRef
}

// BackgroundRunner runs a background job's turns in their own session and
// returns the final result text ("" = nothing to post). It must not post
// anything into a chat nor write any chat's transcript.
type BackgroundRunner interface {
	RunBackground(ctx context.Context, in BackgroundRun) (result string, err error)
}

// BackgroundRunnerFunc adapts a function to BackgroundRunner (wiring helper).
type BackgroundRunnerFunc func(ctx context.Context, in BackgroundRun) (string, error)

// RunBackground calls f.
func (f BackgroundRunnerFunc) RunBackground(ctx context.Context, in BackgroundRun) (string, error) {
	return f(ctx, in)
}

// Deliverer is the method set of *delivery.Outbound the scheduler uses.
type Deliverer interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
}

// DeliveryRecords reads outbox records (the store): what a run that a crash
// interrupted had displayed.
type DeliveryRecords interface {
	GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error)
}

// HistoryReader reads a chat's model-visible history (transcript.Service),
// used to snapshot the creating chat for target current.
type HistoryReader interface {
	History(ctx context.Context, key string, n int) ([]transcript.Entry, error)
}

// Settings are the scheduler's options.
type Settings struct {
	Enabled bool
	// Location is the default time zone of jobs without their own (nil: UTC).
	Location      *time.Location
	CatchUpMissed bool
	MaxCatchUp    int // missed instants run per job after downtime; 1 = once for all
	FailureAlert  FailureAlert
	RunRetention  int // run records kept per job (default DefaultRunRetention)
}

// FailureAlert says when a failing job posts an alert: after After
// consecutive failures (0: never), at most once per Cooldown.
type FailureAlert struct {
	After    int
	Cooldown time.Duration
}

// Options are the scheduler's settings.
type Options struct {
	// Settings are the user-facing ones (cmd/bot maps the config's
	// scheduler section onto them).
	Settings Settings
	// DefaultAgent is used for jobs added without an AgentID (default "main").
	DefaultAgent string
	// SnapshotSize is how many entries target current snapshots (default 20).
	SnapshotSize int
}

// Deps are what a Scheduler works with.
type Deps struct {
	Store      Store
	Clock      clock.Clock // nil: the real clock
	Runner     ChatRunner
	Background BackgroundRunner
	Deliverer  Deliverer
	// Outbox lets RecoverInterrupted see what an interrupted run displayed;
	// nil: it is taken as nothing (the run fails with a notice).
	Outbox DeliveryRecords
	// History and Routes serve target current's snapshot; Routes may be nil
	// (then the creating chat's own session is read).
	History HistoryReader
	Routes  sessionkey.Resolver
	Log     zerolog.Logger
	// NewID makes job ids and manual run id suffixes (default: random hex).
	NewID func() string
	// Authorizer, if set, is asked before every run.
	Authorizer Authorizer
	// Hints renders the hints of the notices the scheduler posts (failure
	// alerts, interrupted runs) in the terms of the chat they go to, by its
	// platform: which command shows a job's runs, runs or removes it. A
	// platform without one: its notices name no command.
	Hints HintsByPlatform
	// Tools, if set, names the agent's tool servers that are down in the
	// run's diagnostics.
	Tools ToolHealth
}

// Scheduler runs jobs. Construct it with New; it is safe for concurrent use.
type Scheduler struct {
	opt  Options
	d    Deps
	st   Store
	clk  clock.Clock
	log  zerolog.Logger
	loc  *time.Location
	keep int

	// jobMu serialises read-modify-write of job records.
	jobMu sync.Mutex

	mu      sync.Mutex
	running map[string]bool
	// nextMu guards next alone: the cron trigger reads it from cron's own
	// loop, which must never wait for mu (see trigger.Next).
	nextMu  sync.Mutex
	next    map[string]time.Time // cached NextRunAt of enabled jobs
	cron    *cron.Cron
	entries map[string]cron.EntryID
	runCtx  context.Context
}

// New returns a scheduler. It does no I/O.
func New(opt Options, d Deps) *Scheduler {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if opt.SnapshotSize <= 0 {
		opt.SnapshotSize = 20
	}
	if d.NewID == nil {
		d.NewID = randomID
	}
	if opt.DefaultAgent == "" {
		opt.DefaultAgent = "main"
	}
	keep := opt.Settings.RunRetention
	if keep <= 0 {
		keep = DefaultRunRetention
	}
	return &Scheduler{
		opt: opt, d: d, st: d.Store, clk: d.Clock, log: d.Log, loc: cmp.Or(opt.Settings.Location, time.UTC), keep: keep,
		running: map[string]bool{}, next: map[string]time.Time{}, entries: map[string]cron.EntryID{},
	}
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run starts the trigger and blocks until ctx ends. At start every job
// whose instants were missed while the bot was down is handled once by
// RunDue (catch-up). When the scheduler is disabled in the settings, Run
// only waits for ctx.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.opt.Settings.Enabled {
		s.log.Info().Msg("scheduler disabled")
		<-ctx.Done()
		return nil
	}
	if _, err := s.RecoverInterrupted(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.log.Error().Err(err).Msg("finish runs interrupted by a restart")
	}
	if err := s.RunDue(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.log.Error().Err(err).Msg("catch-up at start")
	}
	jobs, err := s.st.Jobs(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("scheduler: list jobs: %w", err)
	}
	l := cronLogger{s.log}
	c := cron.New(cron.WithLocation(s.loc), cron.WithLogger(l),
		cron.WithChain(cron.Recover(l), cron.SkipIfStillRunning(l)))
	s.mu.Lock()
	s.cron, s.runCtx = c, ctx
	for _, j := range jobs {
		s.trackLocked(j)
	}
	s.mu.Unlock()
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	s.mu.Lock()
	// Run may be called again (a process that leads the scheduler again
	// after losing leadership): its entries belonged to the stopped cron.
	s.cron, s.entries = nil, map[string]cron.EntryID{}
	s.mu.Unlock()
	return nil
}

// trackLocked caches a job's next run and gives it a cron entry.
func (s *Scheduler) trackLocked(j Job) {
	s.nextMu.Lock()
	if !j.Enabled || j.State.NextRunAt.IsZero() {
		delete(s.next, j.ID)
	} else {
		s.next[j.ID] = j.State.NextRunAt
	}
	s.nextMu.Unlock()
	if s.cron == nil {
		return
	}
	if _, ok := s.entries[j.ID]; ok {
		return
	}
	id, ctx := j.ID, s.runCtx
	s.entries[id] = s.cron.Schedule(trigger{s: s, id: id}, cron.FuncJob(func() {
		if err := s.runDueJob(ctx, id); err != nil {
			s.log.Error().Err(err).Str("job", id).Msg("job run")
		}
	}))
}

func (s *Scheduler) untrack(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMu.Lock()
	delete(s.next, id)
	s.nextMu.Unlock()
	if e, ok := s.entries[id]; ok && s.cron != nil {
		s.cron.Remove(e)
	}
	delete(s.entries, id)
}

func (s *Scheduler) track(j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackLocked(j)
}

// trigger adapts a job's computed next run to cron.Schedule: cron only
// fires, the scheduler decides. While a job is overdue (running, or just
// fired) it polls every second; runDueJob does nothing when not due.
type trigger struct {
	s  *Scheduler
	id string
}

func (t trigger) Next(now time.Time) time.Time {
	// Only nextMu: cron's loop calls Next while track may hold mu and
	// wait for that loop to take a new entry.
	t.s.nextMu.Lock()
	n, ok := t.s.next[t.id]
	t.s.nextMu.Unlock()
	if !ok {
		return now.Add(time.Minute) // disabled: look again later (cheap no-op)
	}
	if n.After(now) {
		return n
	}
	return now.Add(time.Second)
}

// cronLogger adapts zerolog to cron.Logger.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	l.log.Debug().Str("component", "cron").Fields(kv).Msg(msg)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Str("component", "cron").Err(err).Fields(kv).Msg(msg)
}

// RunDue runs every enabled job that is due at the clock's time, one job
// after another (tests call it instead of the cron trigger). It is also the
// catch-up pass at start.
func (s *Scheduler) RunDue(ctx context.Context) error {
	jobs, err := s.st.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: list jobs: %w", err)
	}
	var errs []error
	for _, j := range jobs {
		if err := s.runDueJob(ctx, j.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Scheduler) acquire(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] {
		return false
	}
	s.running[id] = true
	return true
}

func (s *Scheduler) release(id string) {
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
}

// runDueJob handles one job if it is due: runs, catches up or skips per PlanDue.
func (s *Scheduler) runDueJob(ctx context.Context, id string) error {
	if !s.acquire(id) {
		return nil // one run at a time per job
	}
	defer s.release(id)
	j, ok, err := s.st.Job(ctx, id)
	if err != nil || !ok {
		return err
	}
	now := s.clk.Now()
	if !j.Enabled || j.State.NextRunAt.IsZero() || j.State.NextRunAt.After(now) {
		s.track(j)
		return nil
	}
	sched, err := FromSpec(j.Schedule)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	plan := PlanDue(sched, j.State.NextRunAt, now, s.opt.Settings.CatchUpMissed, s.opt.Settings.MaxCatchUp)
	if len(plan.Skipped) > 0 {
		if err := s.recordSkipped(ctx, j, plan, now); err != nil {
			return err
		}
	}
	if len(plan.Run) == 0 {
		// Nothing runs: continue after now.
		return s.updateJob(ctx, id, func(j *Job) {
			j.State.NextRunAt = sched.Next(now)
		})
	}
	for i, at := range plan.Run {
		claimed, err := s.st.ClaimInstant(ctx, id, at)
		if err != nil {
			return fmt.Errorf("job %s: claim %s: %w", id, at.Format(time.RFC3339), err)
		}
		if !claimed {
			s.log.Warn().Str("job", id).Time("instant", at).Msg("instant already ran; not running it again")
			if err := s.updateJob(ctx, id, func(j *Job) { j.State.NextRunAt = sched.Next(at) }); err != nil {
				return err
			}
			continue
		}
		missed := 0
		if i == len(plan.Run)-1 {
			missed = len(plan.Skipped)
		}
		trig := TriggerSchedule
		if plan.Late {
			trig = TriggerCatchUp
		}
		cur, ok, err := s.st.Job(ctx, id)
		if err != nil || !ok {
			return err
		}
		if _, err := s.execute(ctx, cur, sched, at, trig, missed); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scheduler) recordSkipped(ctx context.Context, j Job, plan CatchUp, now time.Time) error {
	last := plan.Skipped[len(plan.Skipped)-1]
	reason := "missed while the bot was down or busy; a later run covers it"
	if len(plan.Run) == 0 {
		reason = "missed while the bot was down; catchUpMissed is off, so it was skipped"
		// Claim it so a restart does not reconsider it.
		if _, err := s.st.ClaimInstant(ctx, j.ID, last); err != nil {
			return fmt.Errorf("job %s: claim: %w", j.ID, err)
		}
	}
	r := Run{
		JobID: j.ID, RunID: scheduledRunID(last) + "-skip", Trigger: TriggerSchedule, ScheduledAt: last,
		StartedAt: now, FinishedAt: now, Status: StatusSkipped, Error: reason,
		Late: true, LateBy: now.Sub(last), Missed: len(plan.Skipped) - 1,
		Delivery: RunDelivery{Status: DeliveryNotRequested, MessageIDs: []string{}},
	}
	if err := s.st.PutRun(ctx, r, s.keep); err != nil {
		return fmt.Errorf("job %s: record skipped run: %w", j.ID, err)
	}
	s.log.Info().Str("job", j.ID).Int("missed", len(plan.Skipped)).Bool("catchUp", len(plan.Run) > 0).Msg("scheduled instants missed")
	return nil
}

func scheduledRunID(at time.Time) string { return at.UTC().Format("20060102T150405Z") }

// updateJob applies fn to the stored job under jobMu; a deleted job is left deleted.
func (s *Scheduler) updateJob(ctx context.Context, id string, fn func(*Job)) error {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	j, ok, err := s.st.Job(ctx, id)
	if err != nil || !ok {
		return err
	}
	fn(&j)
	if err := s.st.PutJob(ctx, j); err != nil {
		return fmt.Errorf("job %s: save: %w", id, err)
	}
	s.track(j)
	return nil
}

// execute runs job j for instant at (zero for a manual run) and records
// the run and the job's new state. It returns the finished run.
func (s *Scheduler) execute(ctx context.Context, j Job, sched Schedule, at time.Time, trig string, missed int) (Run, error) {
	start := s.clk.Now()
	r := Run{JobID: j.ID, Trigger: trig, ScheduledAt: at, StartedAt: start, Status: StatusRunning, Missed: missed,
		Delivery: RunDelivery{Status: DeliveryNotRequested, MessageIDs: []string{}}}
	if at.IsZero() {
		r.RunID = "m" + start.UTC().Format("20060102T150405Z") + "-" + s.d.NewID()
	} else {
		r.RunID = scheduledRunID(at)
		if lb := start.Sub(at); lb > LateAfter {
			r.Late, r.LateBy = true, lb
		}
	}
	if err := s.st.PutRun(ctx, r, s.keep); err != nil {
		return r, fmt.Errorf("job %s: record run start: %w", j.ID, err)
	}

	s.perform(ctx, j, &r)
	r.FinishedAt = s.clk.Now()
	return s.finish(ctx, j, sched, r)
}

// finish records a finished run and the job's new state, and posts the
// failure alert or auto-disable notice the outcome calls for.
func (s *Scheduler) finish(ctx context.Context, j Job, sched Schedule, r Run) (Run, error) {
	if r.Delivery.MessageIDs == nil {
		r.Delivery.MessageIDs = []string{}
	}
	wctx := context.WithoutCancel(ctx)
	s.jobMu.Lock()
	cur, ok, err := s.st.Job(wctx, j.ID)
	if err != nil || !ok {
		s.jobMu.Unlock()
		return r, err // removed while running: nothing to record
	}
	if err := s.st.PutRun(wctx, r, s.keep); err != nil {
		s.jobMu.Unlock()
		return r, fmt.Errorf("job %s: record run: %w", j.ID, err)
	}
	notice := s.applyOutcome(&cur, sched, r)
	if err := s.st.PutJob(wctx, cur); err != nil {
		s.jobMu.Unlock()
		return r, fmt.Errorf("job %s: save state: %w", j.ID, err)
	}
	s.track(cur)
	s.jobMu.Unlock()

	if notice != nil {
		s.postNotice(wctx, cur, &r, *notice)
	}
	s.log.Info().Str("job", j.ID).Str("run", r.RunID).Str("status", string(r.Status)).
		Str("delivery", string(r.Delivery.Status)).Bool("late", r.Late).Msg("job run finished")
	return r, nil
}

type noticeKind int

const (
	noticeAlert noticeKind = iota + 1
	noticeDisabled
)

// applyOutcome updates the job's state after run r and says which notice to post.
func (s *Scheduler) applyOutcome(j *Job, sched Schedule, r Run) *noticeKind {
	j.State.LastRunAt, j.State.LastRunID, j.State.LastStatus, j.State.LastError = r.StartedAt, r.RunID, r.Status, r.Error
	if r.Status == StatusOK {
		j.State.ConsecutiveFailures = 0
	} else if r.Status == StatusError {
		j.State.ConsecutiveFailures++
	}
	if !r.ScheduledAt.IsZero() {
		j.State.NextRunAt = NextRun(sched, r.ScheduledAt, r.FinishedAt, j.State.ConsecutiveFailures)
	} else if f := j.State.ConsecutiveFailures; f > 0 && !j.State.NextRunAt.IsZero() {
		// A failed manual run delays the schedule like any failure.
		if nb := NextRun(sched, j.State.NextRunAt.Add(-time.Nanosecond), r.FinishedAt, f); nb.After(j.State.NextRunAt) {
			j.State.NextRunAt = nb
		}
	}
	if j.Schedule.Kind == KindAt && j.State.NextRunAt.IsZero() && j.Enabled {
		j.Enabled = false
		j.State.DisabledReason = DisabledCompleted
		if r.Status != StatusOK {
			j.State.DisabledReason = DisabledFailures
		}
	}
	if r.Status != StatusError {
		return nil
	}
	if j.Schedule.Kind != KindAt && j.State.ConsecutiveFailures >= AutoDisableAfter && j.Enabled {
		j.Enabled = false
		j.State.DisabledReason = DisabledFailures
		k := noticeDisabled
		return &k
	}
	if ShouldAlert(s.opt.Settings.FailureAlert, j.State.ConsecutiveFailures, j.State.LastAlertAt, r.FinishedAt) {
		k := noticeAlert
		return &k
	}
	return nil
}

// postNotice delivers a failure alert or the auto-disable notice to the
// job's delivery target through Outbound (so it lands in that chat's
// transcript once). Its delivery id is fixed per (job, run).
//
// The notice names the failure's kind (r.Summary), never the error text:
// that stays in the run record.
func (s *Scheduler) postNotice(ctx context.Context, j Job, r *Run, kind noticeKind) {
	target, err := DeliveryTarget(j)
	if err != nil {
		s.log.Warn().Err(err).Str("job", j.ID).Msg("failure alert: no target")
		return
	}
	when := r.StartedAt.In(s.jobLoc(j)).Format("2006-01-02 15:04 MST")
	var text, id string
	switch kind {
	case noticeDisabled:
		id = "job:" + j.ID + ":disabled:" + r.RunID
		text = fmt.Sprintf("⚠️ Job %s (`%s`) failed %d times in a row and was turned off. Last failure (run at %s): %s",
			j.Name, j.ID, j.State.ConsecutiveFailures, when, summaryOf(*r))
		if hint := s.d.Hints.For(target).hintLine(j.ID, "See %s; to try again use %s, or remove it with %s and add it anew.",
			HintJobRuns, HintRunJob, HintRemoveJob); hint != "" {
			text += "\n" + hint
		}
	default:
		id = "job:" + j.ID + ":alert:" + r.RunID
		text = fmt.Sprintf("⚠️ Job %s (`%s`) failed %d times in a row. Last failure (run at %s): %s",
			j.Name, j.ID, j.State.ConsecutiveFailures, when, summaryOf(*r))
		if hint := s.d.Hints.For(target).hintLine(j.ID, "See %s.", HintJobRuns); hint != "" {
			text += "\n" + hint
		}
	}
	res, err := s.d.Deliverer.Deliver(ctx, delivery.Delivery{
		ID: id, Target: target, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceAlert, AgentID: j.AgentID, Meta: jobMeta(j, *r)},
	}, nil)
	if err != nil || len(res.MessageIDs) == 0 {
		s.log.Warn().Err(err).Str("job", j.ID).Str("delivery", id).Msg("failure alert not delivered")
		return
	}
	if s.diagnose(r, res, id) {
		if err := s.st.PutRun(ctx, *r, s.keep); err != nil {
			s.log.Warn().Err(err).Str("job", j.ID).Msg("record the alert's diagnostic")
		}
	}
	if kind == noticeAlert {
		if err := s.updateJob(ctx, j.ID, func(j *Job) { j.State.LastAlertAt = r.FinishedAt }); err != nil {
			s.log.Warn().Err(err).Str("job", j.ID).Msg("record alert time")
		}
	}
}

// diagnose records a delivery's Rule 1 exception with the run (a warn
// diagnostic) and says whether there was one.
func (s *Scheduler) diagnose(r *Run, res delivery.Result, deliveryID string) bool {
	d, ok := res.Diagnostic(deliveryID)
	if !ok {
		return false
	}
	r.Diagnostics = append(r.Diagnostics, Diagnostic{Level: d.Level, Reason: d.Reason, DeliveryID: d.DeliveryID, Detail: d.Detail})
	return true
}

func (s *Scheduler) jobLoc(j Job) *time.Location {
	if loc, err := time.LoadLocation(j.Schedule.TZ); err == nil && j.Schedule.TZ != "" {
		return loc
	}
	return s.loc
}

func jobMeta(j Job, r Run) map[string]string {
	m := map[string]string{"jobId": j.ID, "jobName": j.Name, "schedule": j.Schedule.Text, "runId": r.RunID}
	if r.Late {
		m["late"] = HumanDuration(r.LateBy)
	}
	return m
}

func lateNote(r Run) string {
	if !r.Late {
		return ""
	}
	return " (late by " + HumanDuration(r.LateBy) + ")"
}

// perform runs the job's turn(s) and delivery, filling r. Panics are
// recovered into an error status.
func (s *Scheduler) perform(ctx context.Context, j Job, r *Run) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error().Str("job", j.ID).Str("run", r.RunID).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("job run panicked")
			r.Status, r.Error, r.Summary = StatusError, fmt.Sprintf("panic: %v", p), SummaryInternal
			if r.Delivery.Status == "" {
				r.Delivery.Status = DeliveryNotRequested
			}
		}
	}()
	if s.d.Authorizer != nil {
		if err := s.d.Authorizer.AuthorizeRun(ctx, j); err != nil {
			r.Status, r.Error = StatusError, "not authorized: "+err.Error()
			r.Delivery.Status, r.Delivery.Error = DeliveryNotRequested, r.Error
			return
		}
	}
	s.noteTools(ctx, j, r)
	if j.Mode() == ModeInChat {
		s.performInChat(ctx, j, r)
		return
	}
	s.performBackground(ctx, j, r)
}

func (s *Scheduler) performInChat(ctx context.Context, j Job, r *Run) {
	chat, ok := chatOf(j)
	if !ok {
		r.Status, r.Error, r.Summary = StatusError, fmt.Sprintf("in-chat target %q names no conversation", j.Target), SummaryNoTarget
		return
	}
	key := sessionkey.ForConversation(j.AgentID, chat)
	if k, ok := sessionTargetKey(j.Target); ok {
		key = k
	}
	r.SessionKey = key
	r.Delivery.Target = FormatTo(chat)
	ids, err := s.d.Runner.RunJobTurn(ctx, InChatRun{
		JobID: j.ID, JobName: j.Name, RunID: r.RunID, AgentID: j.AgentID, DeliveryID: "job:" + j.ID + ":run:" + r.RunID,
		Conversation: chat, SessionKey: key, Prompt: j.Prompt,
		Trigger: "⏰ " + j.Name + lateNote(*r) + ": " + j.Prompt,
		Meta:    jobMeta(j, *r), ScheduledAt: r.ScheduledAt, Late: r.Late, LateBy: r.LateBy, CreatedBy: j.CreatedBy,
	})
	r.Delivery.MessageIDs = slices.Clone(ids)
	r.Summary = FailureSummary(err)
	switch {
	case errors.Is(err, ErrTurnFailed) && len(ids) > 0:
		// The turn failed, and the chat displayed the trigger and a
		// failure notice: the run failed, what it posted was delivered.
		r.Status, r.Error = StatusError, err.Error()
		r.Delivery.Status = DeliveryDelivered
	case err != nil:
		r.Status, r.Error = StatusError, err.Error()
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, err.Error()
	case len(ids) == 0:
		r.Status, r.Error, r.Summary = StatusError, "the turn returned no message ids: nothing was displayed", SummaryNothingShown
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, r.Error
	default:
		r.Status = StatusOK
		r.Delivery.Status = DeliveryDelivered
	}
}

func (s *Scheduler) performBackground(ctx context.Context, j Job, r *Run) {
	target, err := DeliveryTarget(j)
	if err != nil {
		r.Status, r.Error, r.Summary = StatusError, err.Error(), SummaryNoTarget
		return
	}
	r.SessionKey = sessionkey.CronRun(j.AgentID, j.ID, r.RunID)
	r.Delivery.Target = FormatTo(target)
	in := BackgroundRun{JobID: j.ID, RunID: r.RunID, AgentID: j.AgentID, SessionKey: r.SessionKey, Prompt: j.Prompt,
		CreatedBy: j.CreatedBy, Conversation: target}
	if j.Target == TargetCurrent {
		// A seed entry whose message was deleted since is erased and left out.
		in.Seed = slices.DeleteFunc(slices.Clone(j.Seed), func(e transcript.Entry) bool { return e.Deleted || e.IsChange() })
	}
	result, err := s.d.Background.RunBackground(ctx, in)
	if err != nil {
		r.Status, r.Error, r.Summary = StatusError, err.Error(), FailureSummary(err)
		return
	}
	result = strings.TrimSpace(result)
	if result == "" || strings.EqualFold(result, "NO_REPLY") {
		r.Status = StatusOK
		r.Delivery.Status = DeliveryNotRequested
		return
	}
	text := result
	if r.Late {
		text = "⏰ " + j.Name + lateNote(*r) + "\n" + result
	}
	res, err := s.d.Deliverer.Deliver(ctx, delivery.Delivery{
		ID: "job:" + j.ID + ":run:" + r.RunID, Target: target, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: j.AgentID, Meta: jobMeta(j, *r)},
	}, nil)
	if err == nil && len(res.MessageIDs) == 0 {
		err = errors.New("no message id in the delivery receipt")
	}
	if err != nil {
		// The result did not reach the chat: the run failed at what it is for.
		r.Status, r.Error = StatusError, "delivery failed: "+err.Error()
		r.Summary = FailureSummary(err)
		if !strings.HasPrefix(r.Summary, summaryDeliveryPrefix) {
			r.Summary = summaryDeliveryPrefix
		}
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, err.Error()
		return
	}
	s.diagnose(r, res, "job:"+j.ID+":run:"+r.RunID)
	r.Status = StatusOK
	r.Delivery.Status, r.Delivery.MessageIDs = DeliveryDelivered, slices.Clone(res.MessageIDs)
}
