package scheduler

import (
	"context"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// Mode is how a job runs (Rule 2): in the chat or in the background, never both.
type Mode string

// Modes.
const (
	// ModeInChat: the run is a turn in its chat's session; it delivers only there.
	ModeInChat Mode = "in-chat"
	// ModeBackground: the run has its own session; only its result is delivered.
	ModeBackground Mode = "background"
)

// Targets (Job.Target). A "session:<key>" target is written with SessionTargetPrefix.
const (
	TargetMain          = "main"
	TargetIsolated      = "isolated"
	TargetCurrent       = "current"
	SessionTargetPrefix = "session:"
)

// ScheduleKind names the kind of a schedule.
type ScheduleKind string

// Schedule kinds.
const (
	KindCron  ScheduleKind = "cron"
	KindEvery ScheduleKind = "every"
	KindAt    ScheduleKind = "at"
)

// ScheduleSpec is the stored form of a schedule; Schedule() rebuilds the
// computable schedule from it.
type ScheduleSpec struct {
	Kind ScheduleKind `json:"kind"`
	// Expr is the 5-field cron expression (KindCron).
	Expr string `json:"expr,omitempty"`
	// Every is the interval (KindEvery), anchored at Anchor.
	Every  time.Duration `json:"every,omitempty"`
	Anchor time.Time     `json:"anchor,omitzero"`
	// At is the one-shot instant (KindAt).
	At time.Time `json:"at,omitzero"`
	// TZ is the IANA zone the schedule is read in.
	TZ string `json:"tz"`
	// Text is what the user wrote.
	Text string `json:"text"`
}

// RunStatus is the outcome of a run.
type RunStatus string

// Run statuses.
const (
	StatusRunning RunStatus = "running" // started, not finished (a crash leaves it so)
	StatusOK      RunStatus = "ok"
	StatusError   RunStatus = "error"
	StatusSkipped RunStatus = "skipped"
)

// DeliveryStatus says whether a run's output reached its chat.
type DeliveryStatus string

// Delivery statuses. Delivered is recorded only from a receipt (message ids).
const (
	DeliveryDelivered    DeliveryStatus = "delivered"
	DeliveryFailed       DeliveryStatus = "failed"
	DeliveryNotRequested DeliveryStatus = "not-requested"
)

// Disable reasons (JobState.DisabledReason).
const (
	DisabledFailures  = "consecutive-failures"
	DisabledCompleted = "completed" // a one-shot `at` job that ran
	DisabledByUser    = "user"
)

// JobState is the runtime state of a job.
type JobState struct {
	NextRunAt           time.Time `json:"nextRunAt,omitzero"`
	LastRunAt           time.Time `json:"lastRunAt,omitzero"`
	LastRunID           string    `json:"lastRunId,omitempty"`
	LastStatus          RunStatus `json:"lastStatus,omitempty"`
	LastError           string    `json:"lastError,omitempty"`
	ConsecutiveFailures int       `json:"consecutiveFailures,omitempty"`
	LastAlertAt         time.Time `json:"lastAlertAt,omitzero"`
	DisabledReason      string    `json:"disabledReason,omitempty"`
}

// Job is a scheduled prompt.
type Job struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	AgentID  string       `json:"agentId"`
	Schedule ScheduleSpec `json:"schedule"`
	Prompt   string       `json:"prompt"`
	// Target is main | isolated | current | session:<key>.
	Target string `json:"target"`
	// To is the delivery target (channel:<id> | user:<id>); "" = the creating conversation.
	To string `json:"to,omitempty"`
	// StoredMode is the mode fixed at creation. Jobs written before modes
	// existed may carry a mode that breaks Rule 2; Diagnose finds them.
	StoredMode Mode `json:"mode"`
	// Seed is the snapshot of the creating chat's recent history (target current).
	Seed      []transcript.Entry      `json:"seed,omitempty"`
	CreatedBy string                  `json:"createdBy,omitempty"`
	CreatedIn binding.ConversationRef `json:"createdIn"`
	CreatedAt time.Time               `json:"createdAt"`
	Enabled   bool                    `json:"enabled"`
	State     JobState                `json:"state"`
}

// Mode is the job's mode: the stored one, or for a job stored without one
// the mode its target and delivery target require.
func (j Job) Mode() Mode {
	if j.StoredMode != "" {
		return j.StoredMode
	}
	return RequiredMode(j)
}

// RunDelivery is what happened to a run's output.
type RunDelivery struct {
	Status     DeliveryStatus `json:"status"`
	MessageIDs []string       `json:"messageIds"`
	Error      string         `json:"error,omitempty"`
	// Target is the conversation delivered to ("channel:<id>" or "user:<id>").
	Target string `json:"target,omitempty"`
}

// Run triggers.
const (
	TriggerSchedule = "schedule"
	TriggerCatchUp  = "catch-up"
	TriggerManual   = "manual"
)

// Run is one execution (or skip) of a job.
type Run struct {
	JobID       string    `json:"jobId"`
	RunID       string    `json:"runId"`
	Trigger     string    `json:"trigger"`
	ScheduledAt time.Time `json:"scheduledAt,omitzero"`
	StartedAt   time.Time `json:"startedAt"`
	FinishedAt  time.Time `json:"finishedAt,omitzero"`
	Status      RunStatus `json:"status"`
	Error       string    `json:"error,omitempty"`
	// Summary is the failure's kind in a few words (FailureSummary): what
	// alerts and notices in a chat say; Error keeps the full text.
	Summary string `json:"summary,omitempty"`
	// Late is set when the run started more than LateAfter after its instant.
	Late   bool          `json:"late"`
	LateBy time.Duration `json:"lateBy,omitempty"`
	// Missed counts the scheduled instants this run stands for beyond its own
	// (catch-up runs once for several missed instants).
	Missed     int         `json:"missed,omitempty"`
	SessionKey string      `json:"sessionKey,omitempty"`
	Delivery   RunDelivery `json:"delivery"`
	// Diagnostics are warnings about the run that are not failures: a
	// Rule 1 exception of one of its deliveries (sent, no transcript entry).
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Diagnostic is a warning recorded with a run.
type Diagnostic struct {
	Level      string `json:"level"`  // "warn"
	Reason     string `json:"reason"` // e.g. delivery.SkipOtherAgent
	DeliveryID string `json:"deliveryId,omitempty"`
	Detail     string `json:"detail,omitempty"` // what happened, for a person
}

// Store persists jobs, their run history and the instant ledger.
// Implementations are safe for concurrent use and return copies.
type Store interface {
	// PutJob inserts or replaces a job by ID.
	PutJob(ctx context.Context, j Job) error
	// DeleteJob removes a job with its runs and ledger; unknown ids are not an error.
	DeleteJob(ctx context.Context, id string) error
	// Job returns one job.
	Job(ctx context.Context, id string) (Job, bool, error)
	// Jobs returns every job ordered by ID.
	Jobs(ctx context.Context) ([]Job, error)
	// PutRun inserts or replaces a run by (JobID, RunID), then keeps only the
	// newest keep runs of that job (by StartedAt, then RunID); keep <= 0 keeps all.
	PutRun(ctx context.Context, r Run, keep int) error
	// Runs returns up to limit (0 = all) runs of a job, newest first.
	Runs(ctx context.Context, jobID string, limit int) ([]Run, error)
	// ClaimInstant records that the scheduled instant of a job is being run.
	// It returns true at most once per (job, instant), across restarts. The
	// ledger is a high-water mark: an instant at or before the newest one
	// claimed for the job is refused too, so it stays one record per job.
	ClaimInstant(ctx context.Context, jobID string, instant time.Time) (bool, error)
}
