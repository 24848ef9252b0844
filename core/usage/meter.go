package usage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
)

// Budget is access.budget: tokens and/or cost per user and per server or
// room within a sliding window Per; a zero limit is off.
type Budget struct {
	Tokens      int64
	Cost        float64
	Per         time.Duration
	GuildTokens int64
	GuildCost   float64
}

// On reports whether any limit is set.
func (b Budget) On() bool {
	return b.Per > 0 && (b.Tokens > 0 || b.Cost > 0 || b.GuildTokens > 0 || b.GuildCost > 0)
}

// Options configure a Meter.
type Options struct {
	Prices map[string]Price // by models entry name; a missing model costs 0
	Budget Budget
	// Exempt are user ids no budget refuses (the configured operator users).
	Exempt []string
}

// Deps are a Meter's collaborators; Observe (may be nil) sees every
// record written (metrics).
type Deps struct {
	Store   Store
	Clock   clock.Clock
	Log     zerolog.Logger
	Observe func(Record)
}

// Meter writes usage records and checks budgets. Safe for concurrent use.
type Meter struct {
	opt Options
	d   Deps

	mu       sync.Mutex
	notified map[string]bool // users told they are over, since their last admitted work
}

// New returns a meter; it does no I/O.
func New(opt Options, d Deps) *Meter {
	return &Meter{opt: opt, d: d, notified: map[string]bool{}}
}

// Stamp prices r at its model's price and sets its time when it has none:
// the record as it will be stored, by Record or with a transcript entry
// (transcript.Entry.Calls, one transaction with the entry).
func (m *Meter) Stamp(r Record) Record {
	if r.At.IsZero() {
		r.At = m.d.Clock.Now()
	}
	r.Cost = m.opt.Prices[r.Model].Cost(r.Input, r.Output)
	return r
}

// Record stamps rs and stores them in one write (records that do not ride
// on a transcript entry).
func (m *Meter) Record(ctx context.Context, rs ...Record) error {
	if len(rs) == 0 {
		return nil
	}
	for i := range rs {
		rs[i] = m.Stamp(rs[i])
	}
	if err := m.d.Store.AddUsage(ctx, rs...); err != nil {
		return fmt.Errorf("usage: record %d calls of %s: %w", len(rs), rs[0].Run, err)
	}
	m.Written(rs)
	return nil
}

// Written tells the meter's observer (metrics) of records stored by
// another write (a transcript entry's).
func (m *Meter) Written(rs []Record) {
	if m.d.Observe == nil {
		return
	}
	for _, r := range rs {
		m.d.Observe(r)
	}
}

// Decision is a budget check's answer.
type Decision struct {
	OK bool
	// Notify: the first refusal since the user's last admitted work, which
	// gets one short notice; later refusals are silent.
	Notify bool
	// Scope is "user" or "server" (refusals only).
	Scope string
	// Until is when enough usage leaves the window to go on (refusals only).
	Until time.Time
	// Limit says which limit was reached, e.g. "100000 tokens per 24h".
	Limit string
}

// Check decides whether user may start model work in place ("" for a
// DM): refused when the user's or the place's usage within the window has
// reached a limit. A store error is returned with an admitting decision:
// an unreadable budget does not stop the bot (the caller logs it).
func (m *Meter) Check(ctx context.Context, user, place string) (Decision, error) {
	b := m.opt.Budget
	if !b.On() || slices.Contains(m.opt.Exempt, user) {
		return Decision{OK: true}, nil
	}
	now := m.d.Clock.Now()
	since := now.Add(-b.Per)
	scopes := []struct {
		scope  string
		f      Filter
		tokens int64
		cost   float64
	}{
		{"user", Filter{Since: since, User: user}, b.Tokens, b.Cost},
		{"server", Filter{Since: since, Place: place}, b.GuildTokens, b.GuildCost},
	}
	for _, s := range scopes {
		if (s.tokens <= 0 && s.cost <= 0) || (s.scope == "server" && place == "") || (s.scope == "user" && user == "") {
			continue
		}
		rs, err := m.d.Store.Usage(ctx, s.f)
		if err != nil {
			return Decision{OK: true}, fmt.Errorf("usage: budget of %s %s: %w", s.scope, user, err)
		}
		if until, over := overUntil(rs, s.tokens, s.cost, b.Per); over {
			m.mu.Lock()
			notify := !m.notified[user]
			m.notified[user] = true
			m.mu.Unlock()
			return Decision{Scope: s.scope, Until: until, Notify: notify, Limit: limitText(s.tokens, s.cost, b.Per)}, nil
		}
	}
	m.mu.Lock()
	delete(m.notified, user)
	m.mu.Unlock()
	return Decision{OK: true}, nil
}

// overUntil reports whether rs (oldest first, all within the window) reach
// a limit, and when enough of them leave the window to fall below it.
func overUntil(rs []Record, tokens int64, cost float64, per time.Duration) (time.Time, bool) {
	t := Sum(rs)
	over := func(t Totals) bool {
		return (tokens > 0 && t.Tokens() >= tokens) || (cost > 0 && t.Cost >= cost)
	}
	if !over(t) {
		return time.Time{}, false
	}
	for _, r := range rs {
		t.Input -= r.Input
		t.Output -= r.Output
		t.Cost -= r.Cost
		if !over(t) {
			return r.At.Add(per), true
		}
	}
	return rs[len(rs)-1].At.Add(per), true
}

func limitText(tokens int64, cost float64, per time.Duration) string {
	var s string
	switch {
	case tokens > 0 && cost > 0:
		s = fmt.Sprintf("%d tokens or %g", tokens, cost)
	case tokens > 0:
		s = fmt.Sprintf("%d tokens", tokens)
	default:
		s = fmt.Sprintf("%g", cost)
	}
	return s + " per " + per.String()
}

// Usage lists records f selects (for /usage, inspect and the console).
func (m *Meter) Usage(ctx context.Context, f Filter) ([]Record, error) {
	return m.d.Store.Usage(ctx, f)
}

// Prune deletes records older than retention (0: keep forever).
func (m *Meter) Prune(ctx context.Context, retention time.Duration) (int, error) {
	if retention <= 0 {
		return 0, nil
	}
	return m.d.Store.PruneUsage(ctx, m.d.Clock.Now().Add(-retention))
}
