package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// The session layer runs a job's turns; these are the seams it implements (wired by the application).

// InChatRun is one run of an in-chat job, handed to the session layer.
type InChatRun struct {
	JobID   string
	JobName string
	RunID   string
	AgentID string
	// DeliveryID is unique per run: sessionkey.JobRunDelivery (the trigger
	// and reply deliveries derive their ids from it).
	DeliveryID string
	// Conversation is the chat the job belongs to; the turn runs in the
	// session it routes to when it runs (sessionkey.Route: a bound chat's
	// bound session) and posts only there.
	Conversation binding.ConversationRef
	Prompt       string
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
// turns, and returns the session it ran in and the message ids of what it
// displayed (trigger and reply). The scheduler writes no transcript entry
// itself.
type ChatRunner interface {
	RunJobTurn(ctx context.Context, in InChatRun) (InChatResult, error)
}

// InChatResult is what an in-chat run's turn did.
type InChatResult struct {
	// SessionKey is the session the turn ran in: the run record names it.
	SessionKey string
	// MessageIDs are the platform ids of what it displayed (trigger and reply).
	MessageIDs []string
}

// ErrTurnFailed wraps a RunJobTurn error when the turn failed (e.g. the
// model call) but its trigger and a failure notice were displayed; the ids
// returned with it are what was displayed.
var ErrTurnFailed = errors.New("the job's turn failed")

// ChatRunnerFunc adapts a function to ChatRunner (wiring helper).
type ChatRunnerFunc func(ctx context.Context, in InChatRun) (InChatResult, error)

// RunJobTurn calls f.
func (f ChatRunnerFunc) RunJobTurn(ctx context.Context, in InChatRun) (InChatResult, error) {
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
