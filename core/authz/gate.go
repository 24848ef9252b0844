package authz

import "github.com/agentbot/agentbot/core/clock"

// Gate is the one admission of work that spends the model - a message
// addressed to the bot, a command that starts a subagent - for every
// platform (config access, alias discord.access): the Policy (dm mode,
// allow and deny lists), then the turn budget of the Limiter. Built once in
// the wiring; each adapter asks it with a platform-neutral Subject
// (operators are exempt: the adapter asks the Authority first). Safe for
// concurrent use.
type Gate struct {
	policy Policy
	limits Limits
	lim    *Limiter
}

// NewGate returns the gate; a nil clock is the real one.
func NewGate(p Policy, l Limits, c clock.Clock) *Gate {
	return &Gate{policy: p, limits: l, lim: NewLimiter(l, c)}
}

// Admission is the gate's answer.
type Admission struct {
	OK bool
	// Reason says why the policy refused (logs and metrics only; a refused
	// message gets no reply). "" when refused for the budget.
	Reason string
	// Limit is the budget's decision (Limit.OK false: over the budget;
	// Limit.Notify: the first refusal, which gets one short notice).
	Limit Decision
}

// Admit applies the policy to s, then takes a turn of the budget of s's
// user and of place (a Discord guild, a Matrix room; "" for a DM).
func (g *Gate) Admit(s Subject, place string) Admission {
	if ok, reason := g.policy.Admit(s); !ok {
		return Admission{Reason: reason}
	}
	d := g.lim.Take(s.UserID, place)
	return Admission{OK: d.OK, Limit: d}
}

// Take charges one turn of the budget without the policy: the work of an
// already admitted message (a re-run after an edit, a subagent it spawns;
// invariant 20).
func (g *Gate) Take(userID, place string) Decision { return g.lim.Take(userID, place) }

// Limits are the gate's turn budget (for the notice's wording).
func (g *Gate) Limits() Limits { return g.limits }
