package session

import (
	"context"
	"errors"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// Kind is what a session is for (sessionkey's vocabulary).
type Kind = sessionkey.Kind

// Session kinds.
const (
	KindMain     = sessionkey.KindMain
	KindSubagent = sessionkey.KindSubagent
	KindJobRun   = sessionkey.KindJobRun
)

// Status of a session's work (subagent runs and job runs).
type Status string

// Statuses.
const (
	StatusIdle      Status = "idle"
	StatusRunning   Status = "running"
	StatusOK        Status = "ok"
	StatusError     Status = "error"
	StatusTimeout   Status = "timeout"
	StatusStopped   Status = "stopped"     // ended by /stop
	StatusUndeliver Status = "undelivered" // finished, but its thread could not take the result
)

// Sentinel errors; user-facing text for them is made at the adapter boundary.
var (
	ErrTooManySubagents = errors.New("too many subagents running")
	ErrUnknownAgent     = errors.New("unknown agent")
	ErrEmptyTask        = errors.New("empty task")
	ErrNoThreads        = errors.New("thread bindings are disabled")
	// ErrTurnFailed: the model call failed; a notice was displayed instead
	// of a reply (RunJobTurn returns it with the displayed message ids).
	ErrTurnFailed = errors.New("turn failed")
	// ErrStopping: the manager has drained for a stop and started nothing;
	// work with a persisted record (an owed turn, a running subagent, a
	// claimed job instant) is taken again at the next start.
	ErrStopping = errors.New("sessions are stopping")
)

// Info is a session's registry record.
type Info struct {
	Key        string                  `json:"key"`
	AgentID    string                  `json:"agentId"`
	Kind       Kind                    `json:"kind"`
	Parent     string                  `json:"parent,omitempty"`
	Requester  binding.ConversationRef `json:"requester,omitzero"`
	Label      string                  `json:"label,omitempty"`
	Task       string                  `json:"task,omitempty"`
	Status     Status                  `json:"status"`
	Result     string                  `json:"result,omitempty"`
	Error      string                  `json:"error,omitempty"`
	BindingID  string                  `json:"bindingId,omitempty"` // the thread binding Spawn made, if any (routing asks the binding service, not this)
	Thread     string                  `json:"thread,omitempty"`
	SpawnedBy  string                  `json:"spawnedBy,omitempty"`
	Generation int                     `json:"generation"`
	CreatedAt  time.Time               `json:"createdAt"`
	EndedAt    time.Time               `json:"endedAt,omitzero"`
	// AnnouncePending is set, in the same write as a subagent's terminal
	// status and result, until its completion reached a terminal outcome
	// (delivered, or failed closed with its notice): a restart announces
	// what a crash left owed (invariant 16).
	AnnouncePending bool `json:"announcePending,omitempty"`
	// Pending are user messages whose turn has not finished yet; a restart
	// resumes them (Resume), so a crash never swallows a question.
	Pending []PendingTurn `json:"pending,omitempty"`
	// LastInbound is, per conversation id, the newest user message this
	// session took: the watermark from which a restarted bot catches up on
	// messages it missed while it was down.
	LastInbound map[string]string `json:"lastInbound,omitempty"`
	// RoutedAt is, for a conversation's own session, when its agent last
	// became the one answering there (agents[].channels; route.go).
	RoutedAt time.Time `json:"routedAt,omitzero"`
}

// PendingTurn is a user message waiting for (or in) its turn.
type PendingTurn struct {
	Message Message `json:"message"`
	// DeliveryID is set for a re-answer of an edited message (discord.edits:
	// reprocess); "" is the message's own turn, "turn:<message id>".
	DeliveryID string `json:"deliveryId,omitempty"`
	// Rounds is the turn's state (invariant 19): how many rounds of a
	// streamed reply were closed as intermediate messages (text before a
	// tool call), recorded before each is finished. The turn's last
	// delivery is roundID(deliveryID, Rounds); only its confirmation
	// answers the turn (turnstate.go).
	Rounds int `json:"rounds,omitempty"`
}

func (p PendingTurn) deliveryID() string {
	if p.DeliveryID != "" {
		return p.DeliveryID
	}
	return "turn:" + p.Message.MessageID
}

// Store persists the session registry.
type Store interface {
	PutSessionInfo(ctx context.Context, info Info) error
	SessionInfos(ctx context.Context) ([]Info, error)
}

// Agent is a persona with its model.
type Agent struct {
	ID           string
	Name         string
	AvatarURL    string
	SystemPrompt string
	Provider     model.Provider
	MaxHistory   int
	MaxToolSteps int
	// Vision: the model takes images (models.<name>.vision).
	Vision bool
	// Stream: the reply is streamed into a live message as the model
	// writes it (models.<name>.stream; needs a model.Streamer).
	Stream bool
	// Model is the models entry the agent uses (usage records of a
	// provider that does not name the model that answered).
	Model string
	// Footer: a reply ends with a line naming the model that answered
	// (models.<name>.footer).
	Footer bool
}

// Message is an inbound user message, already routed to a conversation.
type Message struct {
	Conversation binding.ConversationRef `json:"conversation"`
	MessageID    string                  `json:"messageId"`
	AuthorID     string                  `json:"authorId"`
	AuthorName   string                  `json:"authorName"`
	Text         string                  `json:"text"`
	ReplyTo      string                  `json:"replyTo,omitempty"` // id of the message this one replies to, if any
	// Attachments are the files the message carried.
	Attachments []transcript.Attachment `json:"attachments,omitempty"`
	// ViaEdit: the message reached the bot by an edit that added a mention
	// of it; its entry is appended when the bot learnt of it, after
	// messages displayed later (meta viaEdit=true; docs/DECISIONS.md).
	ViaEdit bool `json:"viaEdit,omitempty"`
}

// Deliverer is the outbound send owner (core/delivery.Outbound).
type Deliverer interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
	SessionFor(ref binding.ConversationRef) (string, binding.Record, bool)
	WithConversation(ref binding.ConversationRef, fn func() error) error
	// Delivered reports whether a delivery id was already confirmed.
	Delivered(ctx context.Context, id string) (bool, error)
	// Abandon finishes an unconfirmed delivery that will not be sent.
	Abandon(ctx context.Context, id, reason string) (bool, error)
}

// Transcripts is what sessions need of core/transcript.Service.
type Transcripts interface {
	Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error)
	History(ctx context.Context, key string, n int) ([]transcript.Entry, error)
	ByMessageID(ctx context.Context, key, messageID string) (transcript.Entry, bool, error)
	Reset(ctx context.Context, key string) (int, error)
	// Locate finds the session whose transcript holds a message id: a
	// user message is taken once a transcript holds its entry.
	Locate(ctx context.Context, messageID string) (string, transcript.Entry, bool, error)
}

// Bindings is what sessions need of core/binding.Service.
type Bindings interface {
	Bind(ctx context.Context, in binding.BindInput) (binding.Record, error)
	Unbind(ctx context.Context, in binding.UnbindInput) ([]binding.Record, error)
	ListBySession(key string) []binding.Record
	Get(id string) (binding.Record, bool)
}

// Router picks a completion's destination (core/delivery.Router).
type Router interface {
	ResolveDestination(req delivery.RouteRequest) delivery.Decision
}

// Threads creates conversations for subagents (the Discord adapter).
type Threads interface {
	// CreateThread creates a public thread named name under parent and
	// returns its ref; it must not create a duplicate on retry.
	CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error)
}

// Jobs is the scheduler surface offered to the model as tools. Results are
// short texts for the model. Each call carries the actor the tool acts for
// (the user whose message started the turn; a job run's creator): the
// implementation applies exactly the rules of /cron add|list|remove, and a
// refusal is an authz.Refusal saying why.
type Jobs interface {
	ScheduleJob(ctx context.Context, actor authz.Actor, req JobRequest) (string, error)
	ListJobs(ctx context.Context, actor authz.Actor) (string, error)
	CancelJob(ctx context.Context, actor authz.Actor, id string) (string, error)
}

// Budget is the users' turn budget (core/authz.Limiter.Take): work an
// admitted message causes beyond its own turn takes a turn of its user's
// budget (invariant 20). guildID "" charges the user's budget alone.
type Budget interface {
	Take(userID, guildID string) authz.Decision
}

// Authority is what the tools need of core/authz.Authority.
type Authority interface {
	// CanPost refuses (an authz.Refusal) unless userID can view and send
	// messages in conv, and the bot can too.
	CanPost(ctx context.Context, userID string, conv binding.ConversationRef) error
}

// Notes is memory's notes (core/notes.Service): the section of a turn's
// system prompt with the notes in scope of the user it acts for in its
// conversation, "" for none (or notes off at the turn's start).
type Notes interface {
	Prompt(ctx context.Context, userID string, conv binding.ConversationRef) string
}

// Toolbox is the agents' tools beyond the bot's own: MCP servers'
// (tools/mcp.Hub). Names never collide with the bot's tools (they hold
// "__"). A user who may not use a tool is not offered it; Call checks again
// and refuses with an authz.Refusal.
type Toolbox interface {
	Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool
	Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error)
}

// JobRequest is a schedule_job tool call.
type JobRequest struct {
	Schedule, Prompt, Target, To string
	AgentID                      string
	CreatedBy                    string
	CreatedIn                    binding.ConversationRef
}
