package authz

import (
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/clock"
)

// TestGateOnePolicyForEveryPlatform: one gate applies the same policy and one shared budget to Discord and Matrix
// subjects alike.
func TestGateOnePolicyForEveryPlatform(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := NewGate(Policy{DM: DMOff, Deny: Lists{Users: []string{"@mallory:hs"}, Channels: []string{"!quiet:hs"}}}, Limits{Turns: 2, Per: time.Hour}, clk)
	tests := []struct {
		name   string
		s      Subject
		place  string
		ok     bool
		reason string
		notify bool
	}{
		{"matrix room", Subject{UserID: "@alice:hs", ChannelID: "!r:hs"}, "!r:hs", true, "", false},
		{"denied matrix user", Subject{UserID: "@mallory:hs", ChannelID: "!r:hs"}, "!r:hs", false, "denied-user", false},
		{"denied room", Subject{UserID: "@bob:hs", ChannelID: "$thread", ParentID: "!quiet:hs"}, "!quiet:hs", false, "denied-channel", false},
		{"matrix DM off", Subject{UserID: "@bob:hs", DM: true}, "", false, "dm-off", false},
		{"discord", Subject{UserID: "123456789012345678", ChannelID: "1"}, "9", true, "", false},
		{"alice's second turn", Subject{UserID: "@alice:hs", ChannelID: "!r:hs"}, "!r:hs", true, "", false},
		{"alice over her budget", Subject{UserID: "@alice:hs", ChannelID: "!other:hs"}, "!other:hs", false, "", true},
	}
	for _, tc := range tests {
		a := g.Admit(tc.s, tc.place)
		if a.OK != tc.ok || a.Reason != tc.reason || (!a.OK && tc.reason == "" && a.Limit.Notify != tc.notify) {
			t.Errorf("%s: %+v, want ok=%v reason=%q notify=%v", tc.name, a, tc.ok, tc.reason, tc.notify)
		}
	}
}
