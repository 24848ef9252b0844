package usage_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/store/memory"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCheck: per-user and per-server limits, tokens or cost, the window,
// the operator exemption and the one notice.
func TestCheck(t *testing.T) {
	type rec struct {
		ago         time.Duration
		user, place string
		in, out     int64
	}
	tests := []struct {
		name   string
		budget usage.Budget
		exempt []string
		recs   []rec
		user   string
		place  string
		want   usage.Decision
	}{
		{"off", usage.Budget{}, nil, []rec{{time.Minute, "u", "g", 1e6, 1e6}}, "u", "g", usage.Decision{OK: true}},
		{"under", usage.Budget{Tokens: 100, Per: time.Hour}, nil, []rec{{time.Minute, "u", "g", 50, 49}}, "u", "g", usage.Decision{OK: true}},
		{"user tokens reached", usage.Budget{Tokens: 100, Per: time.Hour}, nil,
			[]rec{{50 * time.Minute, "u", "g", 60, 0}, {10 * time.Minute, "u", "g", 40, 0}}, "u", "g",
			usage.Decision{Scope: "user", Until: t0.Add(10 * time.Minute), Notify: true, Limit: "100 tokens per 1h0m0s"}},
		{"outside the window", usage.Budget{Tokens: 100, Per: time.Hour}, nil, []rec{{61 * time.Minute, "u", "g", 500, 0}}, "u", "g", usage.Decision{OK: true}},
		{"someone else's", usage.Budget{Tokens: 100, Per: time.Hour}, nil, []rec{{time.Minute, "v", "g", 500, 0}}, "u", "g", usage.Decision{OK: true}},
		{"cost reached (price 1 per million in, 2 out)", usage.Budget{Cost: 0.001, Per: time.Hour}, nil,
			[]rec{{time.Minute, "u", "g", 200, 400}}, "u", "g",
			usage.Decision{Scope: "user", Until: t0.Add(59 * time.Minute), Notify: true, Limit: "0.001 per 1h0m0s"}},
		{"server reached by others", usage.Budget{GuildTokens: 100, Per: time.Hour}, nil,
			[]rec{{time.Minute, "v", "g", 100, 0}}, "u", "g",
			usage.Decision{Scope: "server", Until: t0.Add(59 * time.Minute), Notify: true, Limit: "100 tokens per 1h0m0s"}},
		{"server budget not in a DM", usage.Budget{GuildTokens: 100, Per: time.Hour}, nil,
			[]rec{{time.Minute, "u", "", 500, 0}}, "u", "", usage.Decision{OK: true}},
		{"operator exempt", usage.Budget{Tokens: 1, Per: time.Hour}, []string{"u"}, []rec{{time.Minute, "u", "g", 5, 0}}, "u", "g", usage.Decision{OK: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := memory.NewUsage()
			m := usage.New(usage.Options{Budget: tt.budget, Exempt: tt.exempt, Prices: map[string]usage.Price{"m": {Input: 1, Output: 2}}},
				usage.Deps{Store: st, Clock: clock.NewFake(t0), Log: zerolog.Nop()})
			for _, r := range tt.recs {
				if err := m.Record(context.Background(), usage.Record{At: t0.Add(-r.ago), Model: "m", User: r.user, Place: r.place, Input: r.in, Output: r.out}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := m.Check(context.Background(), tt.user, tt.place)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Check = %+v, %v\nwant %+v", got, err, tt.want)
			}
			if !got.OK {
				if again, _ := m.Check(context.Background(), tt.user, tt.place); again.OK || again.Notify {
					t.Fatalf("second refusal %+v, want silent", again)
				}
			}
		})
	}
}

func TestBy(t *testing.T) {
	rs := []usage.Record{
		{Model: "a", Input: 10, Output: 1, Cost: 1},
		{Model: "b", Input: 100, Output: 1, Cost: 0.5},
		{Model: "a", Input: 5, Output: 0, Cost: 1},
	}
	got := usage.By(rs, usage.ByModel)
	want := []usage.Row{
		{Key: "b", Totals: usage.Totals{Calls: 1, Input: 100, Output: 1, Cost: 0.5}},
		{Key: "a", Totals: usage.Totals{Calls: 2, Input: 15, Output: 1, Cost: 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("By = %+v", got)
	}
}
