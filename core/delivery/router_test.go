package delivery_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

type listerFunc func(string) []binding.Record

func (f listerFunc) ListBySession(k string) []binding.Record { return f(k) }

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
	ended := []binding.Record{{ID: "b9", TargetSessionKey: "child", Status: binding.StatusEnded, Conversation: *ref("discord", "", "t")}}
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
		{"ended binding does not count", "child", ended, ref("discord", "", "c"), false, delivery.ModeFallback, delivery.ReasonNoActiveBinding, ""},
		{"no requester, fail closed", "child", one, nil, true, delivery.ModeFallback, delivery.ReasonMissingRequester, ""},
		{"no requester, single binding", "child", one, nil, false, delivery.ModeBound, delivery.ReasonSingleActiveBinding, "b1"},
		{"no requester, ambiguous", "child", two, nil, false, delivery.ModeFallback, delivery.ReasonAmbiguousWithoutRequester, ""},
		{"invalid requester", "child", one, ref("", "", "x"), false, delivery.ModeFallback, delivery.ReasonInvalidRequester, ""},
		{"requester matches thread", "child", two, ref("discord", "", "thread-2"), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b2"},
		{"normalised match", "child", two, ref(" DISCORD ", "Default", " thread-2 "), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b2"},
		{"only binding on account", "child", one, ref("discord", "", "parent-channel"), true, delivery.ModeBound, delivery.ReasonRequesterMatch, "b1"},
		{"several on account, no exact match", "child", two, ref("discord", "", "parent"), true, delivery.ModeFallback, delivery.ReasonNoRequesterMatch, ""},
		{"single binding other account, fail open", "child", []binding.Record{rec("b1", "acct-a", "t")}, ref("discord", "acct-z", "c"), false, delivery.ModeBound, delivery.ReasonSingleActiveFallback, "b1"},
		{"single binding other account, fail closed", "child", []binding.Record{rec("b1", "acct-a", "t")}, ref("discord", "acct-z", "c"), true, delivery.ModeFallback, delivery.ReasonNoRequesterMatch, ""},
		{"no account match among several", "child", otherAccounts, ref("discord", "acct-z", "c"), false, delivery.ModeFallback, delivery.ReasonNoRequesterMatch, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := delivery.NewRouter(listerFunc(func(string) []binding.Record { return tc.active }))
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
