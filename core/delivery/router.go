package delivery

import (
	"strings"

	"github.com/agentbot/agentbot/core/binding"
)

// EventTaskCompletion is the only event kind routed through bindings today.
const EventTaskCompletion = "task_completion"

// Mode is where a completion goes.
type Mode string

// Modes.
const (
	ModeBound    Mode = "bound"    // to the bound conversation
	ModeFallback Mode = "fallback" // to the requester conversation
	// ModeClosed: nowhere. The session was bound once (by spawn or /focus)
	// and no binding can take the completion now; it never falls back
	// to the requester (invariant 6), which gets a notice instead.
	ModeClosed Mode = "closed"
)

// Router reasons (stable strings, used in logs and metrics).
const (
	ReasonMissingTargetSession      = "missing-target-session"
	ReasonNoActiveBinding           = "no-active-binding"
	ReasonMissingRequester          = "missing-requester"
	ReasonAmbiguousWithoutRequester = "ambiguous-without-requester"
	ReasonInvalidRequester          = "invalid-requester"
	ReasonRequesterMatch            = "requester-match"
	ReasonSingleActiveBinding       = "single-active-binding"
	ReasonSingleActiveFallback      = "single-active-binding-fallback"
	ReasonNoRequesterMatch          = "no-requester-match"
	// ReasonBindingEnded: the session was bound once and has no active binding now.
	ReasonBindingEnded = "binding-ended"
)

// RouteRequest asks where a completion of TargetSessionKey should go.
type RouteRequest struct {
	EventKind        string
	TargetSessionKey string
	Requester        *binding.ConversationRef
	FailClosed       bool
}

// Decision is the router's answer. Binding is set only in ModeBound.
type Decision struct {
	Binding *binding.Record
	Mode    Mode
	Reason  string
}

// BindingLister is what the router needs from the binding service: the
// active bindings of a session, and whether it was ever bound (by
// anything: spawn, /focus, another process).
type BindingLister interface {
	ListBySession(key string) []binding.Record
	EverBound(key string) bool
}

// Router chooses the destination of a task completion. Choosing the
// destination is separate from producing the content; a bound destination
// is never silently replaced by the parent channel.
type Router struct {
	bindings BindingLister
}

// RouterOptions are a Router's settings. It has none yet; the type keeps
// the shape every component shares (New(Options, Deps)).
type RouterOptions struct{}

// RouterDeps are what a Router works with.
type RouterDeps struct {
	Bindings BindingLister
}

// NewRouter returns a router over the active bindings. It does no I/O.
func NewRouter(_ RouterOptions, d RouterDeps) *Router { return &Router{bindings: d.Bindings} }

// ResolveDestination applies the routing rules in order: missing target,
// no active binding, missing requester (fail-closed, single, ambiguous),
// invalid requester, requester match, single-binding fallback, no match.
// A session that was ever bound never falls back: every fallback becomes
// ModeClosed for it (keeping the reason).
func (r *Router) ResolveDestination(req RouteRequest) Decision {
	key := strings.TrimSpace(req.TargetSessionKey)
	if key == "" {
		return Decision{Mode: ModeFallback, Reason: ReasonMissingTargetSession}
	}
	d := r.resolve(key, req)
	if d.Mode == ModeFallback && r.bindings.EverBound(key) {
		d.Mode = ModeClosed
		if d.Reason == ReasonNoActiveBinding {
			d.Reason = ReasonBindingEnded
		}
	}
	return d
}

func (r *Router) resolve(key string, req RouteRequest) Decision {
	var active []binding.Record
	for _, b := range r.bindings.ListBySession(key) {
		if b.Status == binding.StatusActive {
			active = append(active, b)
		}
	}
	if len(active) == 0 {
		return Decision{Mode: ModeFallback, Reason: ReasonNoActiveBinding}
	}
	if req.Requester == nil {
		switch {
		case req.FailClosed:
			return Decision{Mode: ModeFallback, Reason: ReasonMissingRequester}
		case len(active) == 1:
			return bound(active[0], ReasonSingleActiveBinding)
		default:
			return Decision{Mode: ModeFallback, Reason: ReasonAmbiguousWithoutRequester}
		}
	}
	want := req.Requester.Normalize()
	if want.Channel == "" || want.ConversationID == "" {
		return Decision{Mode: ModeFallback, Reason: ReasonInvalidRequester}
	}
	var sameAccount []binding.Record
	for _, b := range active {
		c := b.Conversation.Normalize()
		if c.Channel == want.Channel && c.AccountID == want.AccountID {
			sameAccount = append(sameAccount, b)
		}
	}
	for _, b := range sameAccount {
		if b.Conversation.Normalize().ConversationID == want.ConversationID {
			return bound(b, ReasonRequesterMatch)
		}
	}
	if len(sameAccount) == 1 {
		return bound(sameAccount[0], ReasonRequesterMatch)
	}
	if len(active) == 1 && !req.FailClosed {
		return bound(active[0], ReasonSingleActiveFallback)
	}
	return Decision{Mode: ModeFallback, Reason: ReasonNoRequesterMatch}
}

func bound(b binding.Record, reason string) Decision {
	return Decision{Binding: &b, Mode: ModeBound, Reason: reason}
}
