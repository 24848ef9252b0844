package authz

import (
	"slices"
	"sync"
	"time"

	"github.com/agentbot/agentbot/core/clock"
)

// DM modes (discord.access.dm).
const (
	DMOff       = "off"       // no DM starts a turn
	DMAllowlist = "allowlist" // only allow.users
	DMMembers   = "members"   // users who share a served guild with the bot
)

// Lists are user, role and channel ids.
type Lists struct {
	Users, Roles, Channels []string
}

func (l Lists) empty() bool { return len(l.Users) == 0 && len(l.Roles) == 0 && len(l.Channels) == 0 }

// Policy is discord.access without the rate limit: who may start a turn.
type Policy struct {
	// DM is DMOff, DMAllowlist or DMMembers; "" (a Policy built in code,
	// not from config) admits every DM.
	DM    string
	Allow Lists
	Deny  Lists
}

// Subject is the author of an inbound message and where it was posted.
type Subject struct {
	UserID string
	// Roles are the author's roles in the message's guild (none in a DM).
	Roles []string
	// ChannelID is the channel or thread; ParentID a thread's parent.
	ChannelID, ParentID string
	DM                  bool
	// SharesGuild reports (lazily: it may need a lookup) whether a DM's
	// author is a member of a guild the bot serves.
	SharesGuild func() bool
}

// Admit decides whether a message may start a turn; reason says why not
// (for logs and metrics, never shown to the author: a refused message gets
// no reply). Deny beats allow; empty allow lists allow everyone. In a DM
// only allow.users and deny.users apply (a DM has no roles or channel).
func (p Policy) Admit(s Subject) (bool, string) {
	if slices.Contains(p.Deny.Users, s.UserID) {
		return false, "denied-user"
	}
	if s.DM {
		switch p.DM {
		case DMOff:
			return false, "dm-off"
		case DMAllowlist:
			if !slices.Contains(p.Allow.Users, s.UserID) {
				return false, "dm-not-allowlisted"
			}
			return true, ""
		case "":
			return true, "" // no policy configured (code-built adapters); config always sets a mode
		default: // members
			if len(p.Allow.Users) > 0 && !slices.Contains(p.Allow.Users, s.UserID) {
				return false, "not-allowlisted"
			}
			if s.SharesGuild == nil || !s.SharesGuild() {
				return false, "dm-not-member"
			}
			return true, ""
		}
	}
	for _, r := range s.Roles {
		if slices.Contains(p.Deny.Roles, r) {
			return false, "denied-role"
		}
	}
	if slices.Contains(p.Deny.Channels, s.ChannelID) || (s.ParentID != "" && slices.Contains(p.Deny.Channels, s.ParentID)) {
		return false, "denied-channel"
	}
	if p.Allow.empty() {
		return true, ""
	}
	if slices.Contains(p.Allow.Users, s.UserID) ||
		slices.ContainsFunc(s.Roles, func(r string) bool { return slices.Contains(p.Allow.Roles, r) }) ||
		slices.Contains(p.Allow.Channels, s.ChannelID) || (s.ParentID != "" && slices.Contains(p.Allow.Channels, s.ParentID)) {
		return true, ""
	}
	return false, "not-allowlisted"
}

// Limits are discord.access.rateLimit: at most Turns turns per user and
// GuildTurns per guild within any window of length Per. 0 disables a limit.
type Limits struct {
	Turns      int
	GuildTurns int
	Per        time.Duration
}

// Limiter counts turns per user (across all conversations) and per guild
// in a sliding window, on the injected clock. In memory: a restart resets
// it. Safe for concurrent use.
type Limiter struct {
	lim   Limits
	clock clock.Clock

	mu     sync.Mutex
	users  map[string]*bucket
	guilds map[string]*bucket
	takes  int
}

type bucket struct {
	times    []time.Time // admitted turns inside the window, oldest first
	notified map[string]bool
}

// NewLimiter returns a limiter; a nil clock is the real one.
func NewLimiter(lim Limits, c clock.Clock) *Limiter {
	if c == nil {
		c = clock.Real{}
	}
	return &Limiter{lim: lim, clock: c, users: map[string]*bucket{}, guilds: map[string]*bucket{}}
}

// Decision is the limiter's answer for one turn.
type Decision struct {
	OK bool
	// Notify is true for the first refused turn since the limit was
	// reached: that one gets a short public notice, later ones silence.
	Notify bool
	// Until is when the author can go on (refused turns only).
	Until time.Time
	// Scope is "user" or "guild" (refused turns only).
	Scope string
}

// Take admits a turn by userID in guildID ("" for a DM) or refuses it.
func (l *Limiter) Take(userID, guildID string) Decision {
	if l == nil || l.lim.Per <= 0 || (l.lim.Turns <= 0 && l.lim.GuildTurns <= 0) {
		return Decision{OK: true}
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takes++
	if l.takes%1024 == 0 {
		l.sweep(now)
	}
	ub := l.bucket(l.users, userID, now)
	var gb *bucket
	if guildID != "" && l.lim.GuildTurns > 0 {
		gb = l.bucket(l.guilds, guildID, now)
	}
	refuse := func(b *bucket, scope string) Decision {
		d := Decision{Until: b.times[0].Add(l.lim.Per), Scope: scope, Notify: !b.notified[userID]}
		b.notified[userID] = true
		return d
	}
	if l.lim.Turns > 0 && len(ub.times) >= l.lim.Turns {
		return refuse(ub, "user")
	}
	if gb != nil && len(gb.times) >= l.lim.GuildTurns {
		return refuse(gb, "guild")
	}
	ub.times = append(ub.times, now)
	clear(ub.notified)
	if gb != nil {
		gb.times = append(gb.times, now)
		delete(gb.notified, userID)
	}
	return Decision{OK: true}
}

// bucket returns key's bucket with turns older than the window dropped.
func (l *Limiter) bucket(m map[string]*bucket, key string, now time.Time) *bucket {
	b := m[key]
	if b == nil {
		b = &bucket{notified: map[string]bool{}}
		m[key] = b
	}
	i := 0
	for i < len(b.times) && !b.times[i].Add(l.lim.Per).After(now) {
		i++
	}
	b.times = b.times[i:]
	return b
}

// sweep forgets buckets with no turn left in the window.
func (l *Limiter) sweep(now time.Time) {
	for _, m := range []map[string]*bucket{l.users, l.guilds} {
		for k, b := range m {
			if len(b.times) == 0 || !b.times[len(b.times)-1].Add(l.lim.Per).After(now) {
				delete(m, k)
			}
		}
	}
}
