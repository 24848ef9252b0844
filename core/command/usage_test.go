package command

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/store/memory"
)

// placesOf maps conversation ids to their server ("" a DM).
type placesOf map[string]string

func (p placesOf) Place(_ context.Context, conv binding.ConversationRef) (string, error) {
	return p[conv.ConversationID], nil
}

// TestUsageCommand: everyone sees their own usage by model, summed right;
// an operator of THIS server also sees this server's users and agents and
// never another server's; a DM has no server part; the period bounds it.
func TestUsageCommand(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := memory.NewUsage()
	add := func(ago time.Duration, user, place, agent, model string, in, out int64, cost float64) {
		if err := st.AddUsage(context.Background(), usage.Record{At: now.Add(-ago), User: user, Place: place, Agent: agent, Model: model,
			Input: in, Output: out, Cost: cost}); err != nil {
			t.Fatal(err)
		}
	}
	add(time.Hour, "alice", "gA", "main", "default", 100, 10, 0.5)
	add(2*time.Hour, "alice", "gA", "main", "backup", 50, 5, 0.25)
	add(3*time.Hour, "bob", "gA", "scribe", "default", 1000, 100, 2)
	add(time.Hour, "carol", "gB", "main", "default", 7777, 7, 9)
	add(3*24*time.Hour, "alice", "gA", "main", "default", 9000, 9, 9) // outside a day, inside a week
	c := New(Options{}, Deps{Usage: st, Places: placesOf{"chanA": "gA", "chanB": "gB"}, Clock: clock.NewFake(now),
		Authority: &fakeAuthority{operators: map[string]bool{"alice": true}}})
	run := func(user, conv, period string) string {
		t.Helper()
		opts := map[string]any{}
		if period != "" {
			opts["period"] = period
		}
		r, err := c.Run(context.Background(), Invocation{Conversation: binding.ConversationRef{Channel: "discord", ConversationID: conv},
			UserID: user, Name: "usage", Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		if r.Public {
			t.Fatal("/usage answered publicly")
		}
		return r.Text
	}
	got := run("alice", "chanA", "")
	for _, want := range []string{
		"Your usage, last day: 165 tokens (150 in, 15 out, 0 cached) in 2 calls, cost 0.7500",
		"• default: 110 tokens", "• backup: 55 tokens",
		"This server, last day: 1265 tokens", "• bob: 1100 tokens", "• alice: 165 tokens", "• scribe: 1100 tokens",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("operator in gA: missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "carol") || strings.Contains(got, "7777") {
		t.Errorf("another server's usage shown:\n%s", got)
	}
	if got := run("bob", "chanA", "day"); strings.Contains(got, "This server") || !strings.Contains(got, "1100 tokens") {
		t.Errorf("non-operator:\n%s", got)
	}
	if got := run("alice", "user:alice", ""); strings.Contains(got, "This server") {
		t.Errorf("a DM has no server part:\n%s", got)
	}
	if got := run("alice", "chanB", "week"); !strings.Contains(got, "9174 tokens") || !strings.Contains(got, "This server, last week: 7784 tokens") {
		t.Errorf("week in gB:\n%s", got)
	}
	// Where replies are public (Matrix), only the caller's usage in this room.
	r, err := c.Run(context.Background(), Invocation{Platform: Platform{PublicReplies: true}, UserID: "alice", Name: "usage",
		Conversation: binding.ConversationRef{Channel: "matrix", ConversationID: "chanB"}})
	if err != nil || !strings.Contains(r.Text, "Your usage here, last day: 0 tokens") || strings.Contains(r.Text, "carol") {
		t.Errorf("public replies: %q %v", r.Text, err)
	}
	if _, err := c.Run(context.Background(), Invocation{UserID: "alice", Name: "usage", Options: map[string]any{"period": "year"}}); err == nil ||
		!strings.Contains(err.Error(), "use day, week or month") {
		t.Errorf("bad period: %v", err)
	}
}
