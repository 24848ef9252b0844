package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// Skip reasons: why a confirmed send wrote no transcript entry.
const (
	SkipTurnReply      = "turn-reply"           // the turn writes its own reply
	SkipOtherAgent     = "bound-to-other-agent" // Rule 1 exception, warn
	SkipNativeOnly     = "native-only"          // Rule 1 exception, warn
	SkipNoTranscriptID = ""
)

// Errors returned by Deliver besides *FailedError.
var (
	// ErrInvalidDelivery: the delivery lacks an id, a target or text.
	ErrInvalidDelivery = errors.New("invalid delivery")
)

// FailedError is a send that did not reach the chat. Nothing was written
// to any transcript. Err wraps one of the Sender sentinels.
type FailedError struct {
	DeliveryID string
	Target     binding.ConversationRef
	Err        error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("delivery %s to %s failed: %v", e.DeliveryID, e.Target.ConversationID, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }

// Result is a confirmed delivery.
type Result struct {
	MessageIDs []string
	// SessionKey is the destination session the entry went to ("" when skipped).
	SessionKey string
	Entry      transcript.Entry
	Written    bool
	SkipReason string
}

// Appender writes transcript entries (core/transcript.Service).
type Appender interface {
	Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error)
}

// Bindings is what Outbound needs from the binding service: where a
// conversation routes now, and recording activity.
type Bindings interface {
	sessionkey.Resolver
	Touch(id string, at time.Time)
}

// CommitFunc runs under the destination conversation's lock after Discord
// confirmed a turn reply, so the turn's own entry lands in display order.
type CommitFunc func(ctx context.Context, r Receipt) error

// Outbound is the single send owner. For each delivery it records a pending
// outbox row, sends, and only after Discord's receipt appends exactly one
// transcript entry to the session the destination conversation routes to.
// Sends to one conversation are serialised, so the transcript order is the
// display order.
type Outbound struct {
	sender       Sender
	outbox       Store
	transcripts  Appender
	bindings     Bindings
	defaultAgent string
	agents       Agents
	clock        clock.Clock
	log          zerolog.Logger
	observe      func(Record)
	diagnose     func(Diagnostic)
	claimer      Claimer
	redact       Redactor
	owner        string
	lease        time.Duration

	locks keyedMutex

	// active counts the deliveries this process is working on (a Deliver
	// in progress, a Live whose pump runs): their owner is alive, so
	// Recover leaves them alone (invariant 19).
	activeMu sync.Mutex
	active   map[string]int
	// heldConvs counts the conversations an owner of several live
	// messages holds (Hold), by conversation key.
	heldConvs map[string]int

	recoverers map[transcript.Source]RecoverFunc
}

// RecoverFunc finishes a recovered delivery the way its producer's live
// path would (routing afresh, failing closed), instead of Recover sending
// it as recorded. handled=false leaves it to Recover.
type RecoverFunc func(ctx context.Context, r Record) (handled bool, err error)

// Claimer gives one process at a time the right to finish a delivery
// (several processes sharing one outbox): Claim succeeds when the record
// is unclaimed, already owner's, or its lease ran out, and (re)starts the
// lease. A record that does not exist is not claimed.
type Claimer interface {
	ClaimDelivery(ctx context.Context, id, owner string, lease time.Duration) (bool, error)
}

// ErrClaimed: another process holds the claim on the delivery; it was
// neither sent nor recorded here.
var ErrClaimed = errors.New("delivery claimed by another process")

// DefaultClaimLease is how long a claim keeps other processes off a delivery.
const DefaultClaimLease = 5 * time.Minute

// OutboundOptions are an Outbound's settings.
type OutboundOptions struct {
	// DefaultAgent is the agent of a conversation's own session (routing)
	// where OutboundDeps.Agents names none.
	DefaultAgent string
	// Owner and Lease are this process's claims on deliveries (Lease
	// defaults to DefaultClaimLease); used only with OutboundDeps.Claimer.
	Owner string
	Lease time.Duration
}

// OutboundDeps are what an Outbound works with.
type OutboundDeps struct {
	Sender      Sender
	Outbox      Store
	Transcripts Appender
	Bindings    Bindings
	// Agents, if set, says which agent answers in an unbound conversation
	// (agents[].channels, core/agentroute); nil: the default agent.
	Agents Agents
	Clock  clock.Clock // nil: the real clock
	Log    zerolog.Logger
	// Observe, if set, sees every finished delivery record (metrics).
	Observe func(Record)
	// Diagnose, if set, sees each Rule 1 exception once, when the delivery
	// is first confirmed (metrics).
	Diagnose func(Diagnostic)
	// Claimer, if set, makes this process claim each delivery (as
	// OutboundOptions.Owner, for its Lease) before sending it, so a
	// process recovering the outbox never sends what another live process
	// is sending. nil: one process owns the outbox (bbolt).
	Claimer Claimer
	// Redact, if set, removes the configured secrets (and secret shapes)
	// from every text sent to a chat (invariant 14): the log's redactor.
	// Outbound applies it before a delivery is first recorded, so its
	// fixed text, the display and the transcript hold the same text.
	Redact Redactor
	// Recover, if set, makes Recover hand unfinished deliveries of a
	// source to its function instead of sending them as recorded.
	Recover map[transcript.Source]RecoverFunc
}

// Agents says which agent answers in a conversation (core/agentroute.Table):
// the agent of the conversation's own session, "" for the default.
type Agents interface {
	Agent(ref binding.ConversationRef) string
}

// Redactor removes secrets from text (internal/redact.Redactor).
type Redactor interface {
	String(s string) string
	// Unfinished: how many bytes at the end of s may begin a secret
	// (held back while a live text grows).
	Unfinished(s string) int
}

// NewOutbound returns the send owner. It does no I/O.
func NewOutbound(opt OutboundOptions, d OutboundDeps) *Outbound {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Observe == nil {
		d.Observe = func(Record) {}
	}
	if d.Diagnose == nil {
		d.Diagnose = func(Diagnostic) {}
	}
	if opt.Lease <= 0 {
		opt.Lease = DefaultClaimLease
	}
	return &Outbound{
		sender: d.Sender, outbox: d.Outbox, transcripts: d.Transcripts, bindings: d.Bindings,
		defaultAgent: opt.DefaultAgent, agents: d.Agents, clock: d.Clock, log: d.Log, observe: d.Observe, diagnose: d.Diagnose,
		claimer: d.Claimer, redact: d.Redact, owner: opt.Owner, lease: opt.Lease, recoverers: d.Recover,
	}
}

// SessionFor returns the session a conversation routes to now (invariant 10).
// An unbound conversation routes to its own session of the agent that
// answers there (OutboundDeps.Agents), resolved at each call.
func (o *Outbound) SessionFor(ref binding.ConversationRef) (string, binding.Record, bool) {
	agent := o.defaultAgent
	if o.agents != nil {
		if a := o.agents.Agent(ref); a != "" {
			agent = a
		}
	}
	return sessionkey.Route(o.bindings, agent, ref)
}

// Delivered reports whether the delivery id was confirmed by Discord.
func (o *Outbound) Delivered(ctx context.Context, id string) (bool, error) {
	r, ok, err := o.outbox.GetDelivery(ctx, id)
	if err != nil {
		return false, fmt.Errorf("look up delivery %s: %w", id, err)
	}
	return ok && (r.State == StateDelivered || r.State == StateSent), nil
}

// WithConversation runs fn under the conversation's send lock, so an entry
// fn writes (a turn's user message) keeps its place in display order. A
// conversation an owner holds (Hold: an ACP turn, which may wait minutes
// on a person) is not waited for: fn runs at once. Its owner writes its
// own entries when it ends, and a user message's entry is ordered among
// users' entries only, so nothing fn writes can land out of order; a
// deletion's barrier or a user's message then never stalls behind a turn
// waiting on a click (nor a graceful stop's drain behind it).
func (o *Outbound) WithConversation(ref binding.ConversationRef, fn func() error) error {
	if o.heldConv(ref) {
		return fn()
	}
	unlock := o.locks.lock(ref.Normalize().Key())
	defer unlock()
	return fn()
}

// Hold takes the conversation's send lock for an owner of several live
// messages there (LiveOptions.NoSendLock: an ACP turn) until release is
// called: from its first post until its last entry is written nothing
// else is displayed or written in the conversation, so transcript order
// stays display order, as for a single Live. While it is held, Recover
// leaves the conversation's unfinished deliveries for a later pass (their
// owner is alive; a pass must not wait on a turn that waits on a person).
func (o *Outbound) Hold(ref binding.ConversationRef) (release func()) {
	key := ref.Normalize().Key()
	unlock := o.locks.lock(key)
	o.activeMu.Lock()
	if o.heldConvs == nil {
		o.heldConvs = map[string]int{}
	}
	o.heldConvs[key]++
	o.activeMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			o.activeMu.Lock()
			if o.heldConvs[key]--; o.heldConvs[key] <= 0 {
				delete(o.heldConvs, key)
			}
			o.activeMu.Unlock()
			unlock()
		})
	}
}

// heldConv reports whether an owner holds the conversation (Hold).
func (o *Outbound) heldConv(ref binding.ConversationRef) bool {
	o.activeMu.Lock()
	defer o.activeMu.Unlock()
	return o.heldConvs[ref.Normalize().Key()] > 0
}

// Deliver sends d once and writes its transcript entry once. Calling it
// again with the same ID after success returns the first result without
// sending; after a crash between send and write it finishes the write.
// commit, if not nil, is called for turn replies (see CommitFunc).
func (o *Outbound) Deliver(ctx context.Context, d Delivery, commit CommitFunc) (Result, error) {
	return o.deliver(ctx, d, commit, false)
}

// deliver is Deliver; recovering: called by Recover, which must not take
// a delivery this process is still working on.
func (o *Outbound) deliver(ctx context.Context, d Delivery, commit CommitFunc, recovering bool) (Result, error) {
	if d.ID == "" || !d.Target.Valid() || (d.Text == "" && !d.Native) {
		return Result{}, fmt.Errorf("deliver %q: %w", d.ID, ErrInvalidDelivery)
	}
	if len(d.Files) > 0 {
		return Result{}, fmt.Errorf("deliver %q: files are attached by a live delivery (Outbound.Live): %w", d.ID, ErrInvalidDelivery)
	}
	d.Target = d.Target.Normalize()
	if o.redact != nil {
		// Before the first attempt fixes the text (invariant 14); a
		// resend sends the recorded, already redacted text.
		d.Text = o.redact.String(d.Text)
	}
	held := &heldLock{locks: &o.locks, key: d.Target.Key()}
	held.unlock = o.locks.lock(held.key)
	defer func() { held.unlock() }()
	if recovering && o.busy(d.ID) {
		// Its Deliver runs (paused by a rate limit, the lock released).
		return Result{}, fmt.Errorf("deliver %s: %w", d.ID, errOwned)
	}
	defer o.hold(d.ID)()
	ctx = context.WithValue(ctx, heldLockKey{}, held)
	if d.Interaction != nil && d.Interaction.Settle != nil {
		in := *d.Interaction
		in.Deferred, in.Settle = in.Settle(), nil
		d.Interaction = &in
	}

	prev, found, err := o.outbox.GetDelivery(ctx, d.ID)
	if err != nil {
		return Result{}, fmt.Errorf("deliver %s: read outbox: %w", d.ID, err)
	}
	if found && o.claimer != nil && prev.State != StateDelivered {
		// Claim before touching the record: another process may be
		// sending it now.
		if err := o.claim(ctx, d.ID); err != nil {
			return Result{}, err
		}
	}
	now := o.clock.Now()
	rec := Record{Delivery: d, State: StatePending, CreatedAt: now, UpdatedAt: now}
	if found {
		rec.CreatedAt = prev.CreatedAt
		switch {
		case prev.Live && prev.State == StatePending:
			// A live message is finished by its Live or by Recover only.
			return Result{}, &FailedError{DeliveryID: d.ID, Target: d.Target,
				Err: fmt.Errorf("live delivery unfinished: %w", ErrTransient)}
		case prev.State == StateDelivered || prev.State == StateSent:
			// Already displayed: finish the write if a crash interrupted it, never resend.
			return o.finish(ctx, prev, Receipt{MessageIDs: prev.MessageIDs, Duplicate: true}, commit, true)
		case prev.State == StateFailed && len(prev.MessageIDs) > 0:
			// Partly displayed and recorded as such: the rest is never sent.
			return o.finish(ctx, prev, Receipt{MessageIDs: prev.MessageIDs, Duplicate: true}, commit, true)
		}
		if prev.Delivery.Target.Normalize().Key() != d.Target.Key() {
			return Result{}, fmt.Errorf("deliver %s: target changed from %s to %s: %w", d.ID,
				prev.Delivery.Target.ConversationID, d.Target.ConversationID, ErrInvalidDelivery)
		}
		// The first attempt may have been displayed: its text (and the rest
		// of the payload) is the delivery's, whatever the caller made since.
		rec.Delivery = prev.Delivery
		rec.Delivery.Target = d.Target
		rec.MessageIDs = slices.Clone(prev.MessageIDs)
	}
	if err := o.outbox.PutDelivery(ctx, rec); err != nil {
		return Result{}, fmt.Errorf("deliver %s: record pending: %w", d.ID, err)
	}
	if !found && o.claimer != nil {
		// A new record: claim it before a recovering process can.
		if err := o.claim(ctx, d.ID); err != nil {
			return Result{}, err
		}
	}

	send := rec.Delivery
	send.Resend = found
	send.FirstAttempt = rec.CreatedAt
	send.Shown = slices.Clone(rec.MessageIDs)
	receipt, sendErr := o.sender.Send(ctx, send)
	if sendErr == nil && len(receipt.MessageIDs) == 0 {
		sendErr = fmt.Errorf("no message id in receipt: %w", ErrTransient)
	}
	if sendErr != nil {
		return o.sendFailed(ctx, rec, receipt, sendErr, commit, found)
	}
	rec.State, rec.MessageIDs, rec.Error, rec.UpdatedAt = StateSent, slices.Clone(receipt.MessageIDs), "", o.clock.Now()
	// Persist the receipt first: from here on a restart finishes the write
	// instead of sending again.
	if err := o.outbox.PutDelivery(context.WithoutCancel(ctx), rec); err != nil {
		o.log.Error().Err(err).Str("delivery", d.ID).Msg("record delivered receipt")
	}
	return o.finish(context.WithoutCancel(ctx), rec, receipt, commit, found)
}

// sendFailed records a failed send of rec (receipt: what the sender says it
// displayed before failing) and returns its result: the parts shown when a
// later part failed for good, else the failure.
func (o *Outbound) sendFailed(ctx context.Context, rec Record, receipt Receipt, sendErr error, commit CommitFunc, found bool) (Result, error) {
	d := rec.Delivery
	shown := receipt.MessageIDs
	if len(shown) < len(rec.MessageIDs) {
		shown = rec.MessageIDs
	}
	if len(shown) > 0 && !errors.Is(sendErr, ErrTransient) {
		if receipt.Text != "" {
			// A later part failed permanently after earlier parts were
			// displayed: the transcript records exactly what is shown
			// (invariant 2) and the delivery is reported failed.
			rec.State, rec.MessageIDs, rec.DisplayedText = StateSent, slices.Clone(shown), receipt.Text
			rec.Error, rec.UpdatedAt = sendErr.Error(), o.clock.Now()
			if err := o.outbox.PutDelivery(context.WithoutCancel(ctx), rec); err != nil {
				o.log.Error().Err(err).Str("delivery", d.ID).Msg("record partly displayed delivery")
			}
			o.log.Warn().Err(sendErr).Str("delivery", d.ID).Int("parts_shown", len(shown)).
				Msg("delivery partly displayed: recording the parts shown")
			return o.finish(context.WithoutCancel(ctx), rec, Receipt{MessageIDs: shown}, commit, found)
		}
		// The sender cannot say what the shown parts display: keep it
		// pending rather than record a guess (a resend resumes).
		sendErr = fmt.Errorf("%w (parts shown, text unknown: %w)", sendErr, ErrTransient)
	}
	// A transient failure may hide a message Discord did display (a
	// dropped response): the record stays pending, so Recover at the
	// next start sends it again under the same id (the sender's
	// idempotency finds the displayed one) and writes its entry once.
	// A permanent failure displayed nothing.
	state := StateFailed
	if errors.Is(sendErr, ErrTransient) {
		state = StatePending
		rec.MessageIDs = slices.Clone(shown)
	}
	rec.State, rec.Error, rec.UpdatedAt = state, sendErr.Error(), o.clock.Now()
	if err := o.outbox.PutDelivery(context.WithoutCancel(ctx), rec); err != nil {
		o.log.Error().Err(err).Str("delivery", d.ID).Msg("record failed delivery")
	}
	o.observe(rec)
	return Result{}, &FailedError{DeliveryID: d.ID, Target: d.Target, Err: sendErr}
}

// ErrPartlyDisplayed: a later part of a split message failed permanently;
// the parts shown were recorded as the delivery's transcript entry.
var ErrPartlyDisplayed = errors.New("partly displayed")

// finish commits a confirmed (or partly displayed) delivery. A partly
// displayed one is recorded and still reported as a failed delivery.
func (o *Outbound) finish(ctx context.Context, rec Record, receipt Receipt, commit CommitFunc, recovered bool) (Result, error) {
	res, err := o.commit(ctx, rec, receipt, commit, recovered)
	if err != nil || rec.DisplayedText == "" {
		return res, err
	}
	return res, &FailedError{DeliveryID: rec.Delivery.ID, Target: rec.Delivery.Target,
		Err: fmt.Errorf("%w: %d part(s) shown: %s", ErrPartlyDisplayed, len(rec.MessageIDs), rec.Error)}
}

// claim takes the delivery for this process or reports ErrClaimed.
func (o *Outbound) claim(ctx context.Context, id string) error {
	ok, err := o.claimer.ClaimDelivery(ctx, id, o.owner, o.lease)
	if err != nil {
		return fmt.Errorf("deliver %s: claim: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("deliver %s: %w", id, ErrClaimed)
	}
	return nil
}

// commit writes the transcript entry of a confirmed send (or hands it to
// the turn) and finishes the outbox record.
//
// A recovered delivery (one a previous attempt may have displayed) is marked
// with meta recovered=true: its entry is appended when it is recovered, so
// it can sit after entries of messages displayed later.
func (o *Outbound) commit(ctx context.Context, rec Record, receipt Receipt, commit CommitFunc, recovered bool) (Result, error) {
	d := rec.Delivery
	text := d.Text
	if rec.DisplayedText != "" {
		text = rec.DisplayedText
	}
	receipt.Text, receipt.Recovered, receipt.DisplayedIn = text, recovered, d.Target.ConversationID
	key, b, bound := o.SessionFor(d.Target)
	if d.Producer.Session != "" && d.Producer.Session != key {
		// Its owner's: the route moved after the turn began.
		key, bound = d.Producer.Session, false
	}
	res := Result{MessageIDs: slices.Clone(rec.MessageIDs)}
	if rec.State == StateDelivered {
		// Finished before: its entry is in the session it was written to
		// (found there again by its delivery id), or it was an exception.
		// A route that moved since never gets it a second time.
		if rec.SessionKey == "" {
			res.SkipReason = rec.Reason
			o.observe(rec)
			return res, nil
		}
		key, bound = rec.SessionKey, false
	}
	if bound {
		o.bindings.Touch(b.ID, o.clock.Now())
	}
	agent := sessionkey.Agent(key)
	switch {
	case d.Producer.TurnSessionKey != "" && d.Producer.TurnSessionKey == key && commit != nil:
		res.SkipReason = SkipTurnReply
		if err := commit(ctx, receipt); err != nil {
			return res, fmt.Errorf("deliver %s: turn commit: %w", d.ID, err)
		}
	case bound && d.Producer.AgentID != "" && agent != "" && agent != d.Producer.AgentID:
		// Only a conversation bound to another agent is an exception: an
		// unbound conversation's transcript gets every message it
		// displays, whichever agent produced it.
		res.SkipReason = SkipOtherAgent
		o.exception(rec, res, key)
	case text == "":
		res.SkipReason = SkipNativeOnly
		o.exception(rec, res, key)
	default:
		e, err := o.transcripts.Append(ctx, key, transcript.Entry{
			Role:        transcript.RoleAssistant,
			Author:      authorOf(d),
			Text:        text,
			MessageIDs:  slices.Clone(rec.MessageIDs),
			Source:      d.Producer.Source,
			DeliveryID:  d.ID,
			Meta:        metaFor(d.Producer.Meta, recovered, d.Target.ConversationID),
			Attachments: slices.Clone(rec.Attachments),
		})
		if err != nil {
			return res, fmt.Errorf("deliver %s: %w", d.ID, err)
		}
		res.Entry, res.Written, res.SessionKey = e, true, key
	}
	final := StateDelivered
	if rec.DisplayedText != "" {
		final = StateFailed // partly displayed: recorded, still a failed delivery
	}
	if rec.State != final {
		rec.SessionKey, rec.Reason, rec.State, rec.UpdatedAt = res.SessionKey, res.SkipReason, final, o.clock.Now()
		if res.SkipReason == SkipTurnReply {
			rec.SessionKey = key
		}
		if err := o.outbox.PutDelivery(ctx, rec); err != nil {
			o.log.Error().Err(err).Str("delivery", d.ID).Msg("finish delivery record")
		}
	}
	o.observe(rec)
	return res, nil
}

// exception reports a Rule 1 exception as a warn diagnostic, once: when
// the delivery is first confirmed (a repeated Deliver of a delivered id
// returns it in the Result again without reporting it twice).
func (o *Outbound) exception(rec Record, res Result, key string) {
	if rec.State == StateDelivered {
		return
	}
	diag, _ := res.Diagnostic(rec.Delivery.ID)
	diag.SessionKey = key
	o.log.Warn().Str("delivery", rec.Delivery.ID).Str("session", key).Str("agent", rec.Delivery.Producer.AgentID).
		Str("reason", diag.Reason).Msg("Rule 1 exception: " + diag.Detail)
	o.diagnose(diag)
}

func metaFor(m map[string]string, recovered bool, displayedIn string) map[string]string {
	if !recovered && displayedIn == "" {
		return m
	}
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	if recovered {
		out["recovered"] = "true"
	}
	if displayedIn != "" {
		out[transcript.MetaDisplayedIn] = displayedIn
	}
	return out
}

func authorOf(d Delivery) string {
	if d.Persona.Name != "" {
		return d.Persona.Name
	}
	return d.Producer.AgentID
}

// hold marks delivery id as in progress in this process until the
// returned func is called.
func (o *Outbound) hold(id string) (release func()) {
	o.activeMu.Lock()
	if o.active == nil {
		o.active = map[string]int{}
	}
	o.active[id]++
	o.activeMu.Unlock()
	return func() {
		o.activeMu.Lock()
		if o.active[id]--; o.active[id] <= 0 {
			delete(o.active, id)
		}
		o.activeMu.Unlock()
	}
}

// busy reports whether this process is working on delivery id.
func (o *Outbound) busy(id string) bool {
	o.activeMu.Lock()
	defer o.activeMu.Unlock()
	return o.active[id] > 0
}

// heldLock is the conversation lock a Deliver holds, as its Sender sees it
// through the context (see Pause).
type heldLock struct {
	locks  *keyedMutex
	key    string
	unlock func()
}

type heldLockKey struct{}

// Pause waits d (or until ctx ends). Called by a Sender inside Deliver, it
// releases the conversation's send lock while it waits, so other
// deliveries to the conversation (an interaction's reply, a notice) are not
// held up by this one's rate limit. A Sender may call it only while none of
// this delivery is displayed or possibly displayed (nothing sent yet, or
// only failures that committed nothing, such as a 429): the display order
// then still equals the transcript order. Otherwise it waits with the lock.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	if h, ok := ctx.Value(heldLockKey{}).(*heldLock); ok {
		h.unlock()
		defer func() { h.unlock = h.locks.lock(h.key) }()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Abandon finishes a delivery that will not be sent (its producer failed
// closed: the destination may no longer take it) as skipped with reason,
// so Recover stops taking it. A confirmed one (sent or delivered) is left
// alone and reported as ok=false; so is one that does not exist.
func (o *Outbound) Abandon(ctx context.Context, id, reason string) (ok bool, err error) {
	prev, found, err := o.outbox.GetDelivery(ctx, id)
	if err != nil || !found {
		return false, err
	}
	unlock := o.locks.lock(prev.Delivery.Target.Key())
	defer unlock()
	prev, found, err = o.outbox.GetDelivery(ctx, id)
	if err != nil || !found {
		return false, err
	}
	switch prev.State {
	case StateSent, StateDelivered:
		return false, nil
	case StateSkipped:
		return true, nil
	}
	prev.State, prev.Reason, prev.UpdatedAt = StateSkipped, reason, o.clock.Now()
	if err := o.outbox.PutDelivery(ctx, prev); err != nil {
		return false, fmt.Errorf("abandon delivery %s: %w", id, err)
	}
	o.observe(prev)
	return true, nil
}

// keyedMutex serialises work per key without growing without bound.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*refMutex{}
	}
	l := k.m[key]
	if l == nil {
		l = &refMutex{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
