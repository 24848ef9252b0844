package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// Persona is the identity a message is posted under. An empty persona posts
// as the bot itself.
type Persona struct {
	Name      string `json:"name,omitempty"`
	AvatarURL string `json:"avatarUrl,omitempty"`
}

// Producer describes who asked for a send.
type Producer struct {
	// Source is the transcript source of the entry (job, alert, announce, ...).
	Source transcript.Source `json:"source"`
	// TurnSessionKey is set when the send is the reply of a turn; Outbound then
	// skips the transcript write for that same session, because the turn
	// writes its own reply.
	TurnSessionKey string `json:"turnSessionKey,omitempty"`
	// AgentID is the agent speaking; a destination routed to another agent's
	// session gets no transcript entry (a warn diagnostic instead).
	AgentID string `json:"agentId,omitempty"`
	// Session, if set, is the session the entry is written to whatever the
	// conversation routes to when the send is confirmed: the owner of a
	// message displayed before the route moved (an ACP turn's messages go
	// to the session that owned the turn when it started).
	Session string `json:"session,omitempty"`
	// Meta is copied onto the transcript entry (job id, subagent key, ...).
	Meta map[string]string `json:"meta,omitempty"`
}

// Delivery is one logical send.
type Delivery struct {
	ID      string                  `json:"id"`
	Target  binding.ConversationRef `json:"target"`
	Text    string                  `json:"text"`
	Persona Persona                 `json:"persona,omitzero"`
	// ReplyTo is a message id this send replies to (optional).
	ReplyTo  string   `json:"replyTo,omitempty"`
	Producer Producer `json:"producer"`
	// Native is set when the payload carries non-text content (embeds).
	Native bool `json:"native,omitempty"`
	// ViaWebhook asks the sender to post under Persona by webhook (bound threads).
	ViaWebhook bool `json:"viaWebhook,omitempty"`
	// BindingID is the binding the destination came from, if any.
	BindingID string `json:"bindingId,omitempty"`
	// Files are attached to the first message (a live delivery only; the
	// sender must be a FilePoster). Kept in the outbox with the text.
	Files []File `json:"files,omitempty"`
	// Interaction, when set, answers a slash command publicly with this
	// text (the reply is displayed, so it is a transcript entry). It is
	// kept in the outbox (like webhook credentials, in the 0600 store) so a
	// restarted bot can look the answer up instead of posting it twice.
	Interaction *Interaction `json:"interaction,omitempty"`
	// Resend is set by Outbound when this delivery may already have been
	// displayed (a retry after a crash): senders without an idempotency key
	// look for the earlier message before posting.
	Resend bool `json:"-"`
	// FirstAttempt is set by Outbound: when this delivery was first
	// recorded. A sender reconciling a resend matches only messages
	// created from then on (what this delivery could have created).
	FirstAttempt time.Time `json:"-"`
	// Shown is set by Outbound on a resend: the message ids of the first
	// len(Shown) parts, confirmed displayed by an earlier attempt. The
	// sender resumes after them and returns them first in its receipt.
	Shown []string `json:"-"`
}

// Interaction identifies a slash command invocation to answer.
type Interaction struct {
	ID    string `json:"id"`
	Token string `json:"token"`
	// Deferred: the interaction was answered with a deferred response
	// (type 5); the reply edits @original.
	Deferred bool `json:"deferred,omitempty"`
	// Settle, if set, ends the interaction's deferral timer and reports
	// whether it deferred. Deliver calls it once the send owns the
	// conversation and before it records the delivery: the 3 s deadline
	// runs while the send waits behind the conversation's other sends (a
	// streamed reply holds it), so the timer must keep running until then
	// (invariant 15). Not stored.
	Settle func() (deferred bool) `json:"-"`
}

// Receipt is Discord's confirmation of a send.
type Receipt struct {
	MessageIDs []string
	// Duplicate is true when the platform reported the send had already
	// happened (nonce match or reconciliation), so no new message was posted.
	Duplicate bool
	// Text is what the messages display. A Sender sets it when it returns
	// ids with an error (the parts shown before a later part failed);
	// Outbound sets it on the receipt it hands to a CommitFunc: the
	// delivery's text as fixed at its first attempt, or the parts shown.
	Text string
	// Recovered is set by Outbound when an earlier attempt (maybe another
	// process's) may have displayed the messages: the entry is appended
	// now, possibly after entries of messages displayed later, and is
	// marked with EntryMeta.
	Recovered bool
	// DisplayedIn is set by Outbound on the receipt it hands to a
	// CommitFunc: the id of the conversation the messages are displayed in.
	DisplayedIn string
}

// EntryMeta returns the meta for the transcript entry of this receipt: m,
// plus recovered=true for a recovered delivery, plus the conversation that
// displays it (transcript.MetaDisplayedIn).
func (r Receipt) EntryMeta(m map[string]string) map[string]string {
	return metaFor(m, r.Recovered, r.DisplayedIn)
}

// Failure kinds a Sender reports by wrapping these sentinels.
var (
	// ErrDestinationGone: the conversation cannot take messages any more
	// (deleted, archived or locked by a user). Permanent.
	ErrDestinationGone = errors.New("destination gone")
	// ErrForbidden: the bot lacks access or permission. Permanent.
	ErrForbidden = errors.New("missing permission")
	// ErrRejected: the payload was rejected (invalid form body). Permanent.
	ErrRejected = errors.New("payload rejected")
	// ErrTransient: a retryable failure outlived the sender's retries.
	ErrTransient = errors.New("transient send failure")
)

// Sender posts one delivery and returns the receipt. It retries what is
// retryable itself; an error wraps one of the sentinels above.
type Sender interface {
	Send(ctx context.Context, d Delivery) (Receipt, error)
}

// PendingState is the state of a recorded delivery.
type PendingState string

// Pending states.
const (
	StatePending   PendingState = "pending"   // recorded, not yet confirmed
	StateSent      PendingState = "sent"      // confirmed by Discord, transcript write not yet done
	StateDelivered PendingState = "delivered" // confirmed and committed
	StateFailed    PendingState = "failed"
	StateSkipped   PendingState = "skipped"
)

// Record is a delivery as kept by the outbox.
type Record struct {
	Delivery   Delivery     `json:"delivery"`
	State      PendingState `json:"state"`
	SessionKey string       `json:"sessionKey,omitempty"` // destination session written (if any)
	// MessageIDs: the confirmed messages; while pending, the parts an
	// earlier attempt confirmed (a resend resumes after them).
	MessageIDs []string `json:"messageIds,omitempty"`
	// DisplayedText is set when a later part failed permanently: the text
	// of the parts displayed (MessageIDs), which is what the transcript
	// records. Such a delivery ends failed, with its entry written.
	DisplayedText string `json:"displayedText,omitempty"`
	// Live marks a live delivery (Outbound.Live): LiveParts is the text
	// each part shows or is about to show (written before every post or
	// edit), MessageIDs the parts posted so far.
	Live      bool     `json:"live,omitempty"`
	LiveParts []string `json:"liveParts,omitempty"`
	// Attachments are the delivery's files as the platform shows them
	// (with their URLs), recorded with the id of the message that carries
	// them; the transcript entry gets them.
	Attachments []transcript.Attachment `json:"attachments,omitempty"`
	Error       string                  `json:"error,omitempty"`
	Reason      string                  `json:"reason,omitempty"` // router or skip reason
	CreatedAt   time.Time               `json:"createdAt"`
	UpdatedAt   time.Time               `json:"updatedAt"`
}

// Store is the delivery outbox: a delivery is recorded as pending before it
// is sent and finished with its outcome afterwards.
type Store interface {
	// PutDelivery inserts or replaces a record by Delivery.ID.
	PutDelivery(ctx context.Context, r Record) error
	// GetDelivery returns the record for an id.
	GetDelivery(ctx context.Context, id string) (Record, bool, error)
	// Deliveries returns records with the given state ("" for all), newest first, at most limit (0 = no limit).
	Deliveries(ctx context.Context, state PendingState, limit int) ([]Record, error)
}
