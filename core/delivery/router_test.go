package delivery_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// lister serves fixed active bindings; a session with any of them, or
// with ever set (only ended ones), counts as ever bound.
type lister struct {
	active []binding.Record
	ever   bool
}

func (l lister) ListBySession(string) []binding.Record { return l.active }
func (l lister) EverBound(string) bool                 { return l.ever || len(l.active) > 0 }

func ref(channel, account, conv string) *binding.ConversationRef {
	return &binding.ConversationRef{Channel: channel, AccountID: account, ConversationID: conv}
}

func rec(id, account, conv string) binding.Record {
	return binding.Record{ID: id, TargetSessionKey: "child", Status: binding.StatusActive,
		Conversation: binding.ConversationRef{Channel: "discord", AccountID: account, ConversationID: conv}}
}

func TestResolveDestination(t *testing.T) {
	one := []binding.Record{rec("b1", "default", "thread-1")}
	two := []binding.Record{rec("b1", "default", "thread-1"), rec("b2", "default", "thread-2")}
	otherAccounts := []binding.Record{rec("b1", "acct-a", "thread-1"), rec("b2", "acct-b", "thread-2")}
	tests := []struct {
		name       string
		key        string
		active     []binding.Record
		requester  *binding.ConversationRef
		failClosed bool
		wantMode   delivery.Mode
		wantReason string
		wantID     string
	}{
		{"missing target", "  ", one, nil, false, delivery.ModeFallback, delivery.ReasonMissingTargetSession, ""},
		{"no active binding", "child", nil, ref("discord", "", "c"), false, delivery.ModeFallback, delivery.ReasonNoActiveBinding, ""},
		{"no requester, fail closed", "child", one, nil, true, delivery.ModeClosed, delivery.ReasonMissingRequester, ""},
		{"no requester, single binding", "child", one, nil, false, delivery.ModeBound, delivery.ReasonSingleActiveBinding, "b1"},
		{"no requester, ambiguous", "child", two, nil, false, delivery.ModeClosed, delivery.ReasonAmbiguousWithoutRequester, ""},
		{"invalid requester", "child", one, ref("", "", "x"), false, delivery.ModeClosed, delivery.ReasonInvalidRequester, ""},
		{"requester matches thread", "child", two, ref("discord", "", "thread-2"), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b2"},
		{"normalised match", "child", two, ref(" DISCORD ", "Default", " thread-2 "), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b2"},
		{"only binding on account", "child", one, ref("discord", "", "parent-channel"), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b1"},
		{"several on account, no exact match", "child", two, ref("discord", "", "parent"), true, delivery.ModeClosed, delivery.ReasonNoRequesterMatch, ""},
		{"single binding other account, fail open", "child", []binding.Record{rec("b1", "acct-a", "t")}, ref("discord", "acct-z", "c"), false, delivery.ModeBound, delivery.ReasonSingleActiveFallback, "b1"},
		{"single binding other account, fail closed", "child", []binding.Record{rec("b1", "acct-a", "t")}, ref("discord", "acct-z", "c"), true, delivery.ModeClosed, delivery.ReasonNoRequesterMatch, ""},
		{"no account match among several", "child", otherAccounts, ref("discord", "acct-z", "c"), false, delivery.ModeClosed, delivery.ReasonNoRequesterMatch, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: lister{active: tc.active}})
			d := r.ResolveDestination(delivery.RouteRequest{EventKind: delivery.EventTaskCompletion, TargetSessionKey: tc.key, Requester: tc.requester, FailClosed: tc.failClosed})
			if d.Mode != tc.wantMode || d.Reason != tc.wantReason {
				t.Fatalf("got %s/%s, want %s/%s", d.Mode, d.Reason, tc.wantMode, tc.wantReason)
			}
			if (d.Binding == nil) != (tc.wantID == "") || (d.Binding != nil && d.Binding.ID != tc.wantID) {
				t.Fatalf("binding = %+v, want %q", d.Binding, tc.wantID)
			}
		})
	}
}

// A session bound once (by spawn or /focus: the router cannot tell and
// must not care) whose bindings all ended never falls back to the
// requester: it is closed, whether or not the caller asked to fail closed.
func TestResolveDestinationEverBoundNeverFallsBack(t *testing.T) {
	for _, failClosed := range []bool{true, false} {
		r := delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: lister{ever: true}})
		d := r.ResolveDestination(delivery.RouteRequest{EventKind: delivery.EventTaskCompletion, TargetSessionKey: "child", Requester: ref("discord", "", "c"), FailClosed: failClosed})
		if d.Mode != delivery.ModeClosed || d.Reason != delivery.ReasonBindingEnded || d.Binding != nil {
			t.Fatalf("failClosed=%v: got %s/%s %+v, want closed/%s", failClosed, d.Mode, d.Reason, d.Binding, delivery.ReasonBindingEnded)
		}
	}
	d := delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: lister{}}).ResolveDestination(delivery.RouteRequest{TargetSessionKey: "child", Requester: ref("discord", "", "c"), FailClosed: true})
	if d.Mode != delivery.ModeFallback || d.Reason != delivery.ReasonNoActiveBinding {
		t.Fatalf("never bound: got %s/%s, want fallback/%s", d.Mode, d.Reason, delivery.ReasonNoActiveBinding)
	}
}
