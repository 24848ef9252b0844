package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
)

// Choice is one autocomplete suggestion: Name is what the invoker reads,
// Value what the option receives when they pick it.
type Choice struct {
	Name, Value string
}

// Autocomplete limits: Discord's (the strictest platform's), kept by
// Complete so that no adapter has to trim.
const (
	MaxChoices   = 25  // suggestions per answer
	MaxChoiceLen = 100 // characters of a name and of a value
	// maxChecks bounds the authority checks one answer makes (each may be
	// a platform lookup): the cost of one keystroke is bounded.
	maxChecks = 100
)

// AgentChoice is a configured agent /spawn agent can name.
type AgentChoice struct {
	ID, Name string
}

// Completable names the options Complete answers, as "command sub option"
// (sub empty for a command without subcommands): the options a platform
// registers with autocomplete.
var Completable = []string{
	"focus  target", "stop  target", "spawn  agent",
	"cron remove id", "cron run id", "cron runs id",
	"session idle duration", "session max-age duration",
}

// Completes reports whether Complete answers option of command name/sub.
func Completes(name, sub, option string) bool {
	return slices.Contains(Completable, name+" "+sub+" "+option)
}

// Complete suggests values for option, which the invoker is typing (typed
// is what they typed so far; v carries the command, its subcommand and
// the other options). Every list is filtered by the authority the command
// itself applies (invariant 13): it never offers a job, run, session or
// agent the command would refuse the invoker, so it never names another
// server's jobs or another user's direct messages. At most MaxChoices,
// names and values at most MaxChoiceLen characters (a value that would be
// longer is not offered: it could not be picked whole).
func (c *Commands) Complete(ctx context.Context, v Invocation, option, typed string) []Choice {
	return c.complete(ctx, v, option, typed, false)
}

// complete is Complete; here keeps only what belongs to the invoker's
// conversation (its room's jobs and sessions): a list shown to everyone
// there (Matrix's !help) names nothing of elsewhere.
func (c *Commands) complete(ctx context.Context, v Invocation, option, typed string, here bool) []Choice {
	if !Completes(v.Name, v.Sub, option) {
		return nil
	}
	m := matcher{typed: strings.ToLower(strings.TrimSpace(typed)), here: here}
	switch v.Name {
	case "focus":
		c.completeFocus(ctx, v, &m)
	case "stop":
		c.completeStop(ctx, v, &m)
	case "spawn":
		c.completeAgents(ctx, v, &m)
	case "cron":
		c.completeJobs(ctx, v, &m)
	case "session":
		completeDurations(&m)
	}
	return m.out
}

// matcher collects the choices that match what was typed (a substring of
// the name or the value, ignoring case), up to MaxChoices.
type matcher struct {
	typed  string
	here   bool // only what belongs to the invoker's conversation
	out    []Choice
	checks int
}

func (m *matcher) full() bool { return len(m.out) >= MaxChoices }

// matches reports whether a candidate is worth an authority check.
func (m *matcher) matches(name, value string) bool {
	if m.full() || utf8.RuneCountInString(value) > MaxChoiceLen || value == "" {
		return false
	}
	return strings.Contains(strings.ToLower(name), m.typed) || strings.Contains(strings.ToLower(value), m.typed)
}

// check spends one of the bounded authority checks; false when none is left.
func (m *matcher) check() bool {
	m.checks++
	return m.checks <= maxChecks
}

func (m *matcher) add(name, value string) {
	if m.full() || slices.ContainsFunc(m.out, func(c Choice) bool { return c.Value == value }) {
		return
	}
	m.out = append(m.out, Choice{Name: truncateRunes(name, MaxChoiceLen), Value: value})
}

// sessionValue is how a session is named in an option: its key, or its
// label when the key is too long to be picked (findSession takes both).
func sessionValue(in session.Info) string {
	if utf8.RuneCountInString(in.Key) <= MaxChoiceLen || in.Label == "" {
		return in.Key
	}
	return in.Label
}

// sessionName is how a session reads in a list of choices.
func sessionName(in session.Info, v Invocation) string {
	switch {
	case in.Kind == session.KindSubagent:
		return fmt.Sprintf("%s · subagent (%s), %s", firstNonEmpty(in.Label, in.Key), in.AgentID, in.Status)
	case in.Requester.Key() == v.Conversation.Key():
		return fmt.Sprintf("%s · this conversation", in.AgentID)
	case authz.IsDM(in.Requester):
		return fmt.Sprintf("%s · your direct messages", in.AgentID)
	default:
		return fmt.Sprintf("%s · conversation %s", in.AgentID, in.Requester.ConversationID)
	}
}

// candidates are the sessions a target can name, the invoker's own
// subagents first, then the newest.
func (c *Commands) candidates(v Invocation, m *matcher, keep func(session.Info) bool) []session.Info {
	ins := c.d.Sessions.Sessions(func(in session.Info) bool {
		if m.here && in.Requester.Key() != v.Conversation.Key() {
			return false
		}
		return (in.Kind == session.KindSubagent || in.Kind == session.KindMain) && keep(in)
	})
	slices.Reverse(ins) // newest first
	slices.SortStableFunc(ins, func(a, b session.Info) int {
		return boolRank(a.SpawnedBy == v.UserID) - boolRank(b.SpawnedBy == v.UserID)
	})
	return ins
}

func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// completeFocus: subagents and sessions the invoker may focus (/focus's
// MayFocus), and the external agents they may start (acp:<name>).
func (c *Commands) completeFocus(ctx context.Context, v Invocation, m *matcher) {
	if c.d.ACP != nil {
		for _, name := range c.d.ACP.Startable(ctx, v.actor()) {
			if m.matches(name, "acp:"+name) {
				m.add(name+" · external coding agent", "acp:"+name)
			}
		}
	}
	for _, in := range c.candidates(v, m, func(session.Info) bool { return true }) {
		if !m.matches(sessionName(in, v), sessionValue(in)) {
			continue
		}
		if !m.check() {
			return
		}
		t := authz.FocusTarget{Key: in.Key, Kind: string(in.Kind), Conversation: in.Requester, SpawnedBy: in.SpawnedBy}
		if c.d.Authority.MayFocus(ctx, v.actor(), t) == nil {
			m.add(sessionName(in, v), sessionValue(in))
		}
	}
}

// completeStop: running subagents and turns the invoker may stop (/stop's
// MayStop: their own, or as an operator of the run's server).
func (c *Commands) completeStop(ctx context.Context, v Invocation, m *matcher) {
	for _, in := range c.candidates(v, m, func(in session.Info) bool { _, ok := c.d.Sessions.Running(in.Key); return ok }) {
		if !m.matches(sessionName(in, v), sessionValue(in)) {
			continue
		}
		run, ok := c.d.Sessions.Running(in.Key)
		if !ok {
			continue
		}
		if !m.check() {
			return
		}
		if c.d.Authority.MayStop(ctx, v.actor(), run.Owner, in.Requester, in.Key) == nil {
			m.add(sessionName(in, v), sessionValue(in))
		}
	}
}

// completeAgents: the configured agents, and the external agents the
// invoker may start (/spawn agent takes either).
func (c *Commands) completeAgents(ctx context.Context, v Invocation, m *matcher) {
	for _, a := range c.opt.Agents {
		if m.matches(a.Name, a.ID) {
			m.add(fmt.Sprintf("%s (%s)", firstNonEmpty(a.Name, a.ID), a.ID), a.ID)
		}
	}
	if c.d.ACP == nil {
		return
	}
	for _, name := range c.d.ACP.Startable(ctx, v.actor()) {
		if m.matches(name, name) {
			m.add(name+" · external coding agent", name)
		}
	}
}

// completeJobs: for /cron remove and run the jobs the invoker may remove
// and run (an operator of the job's server), for /cron runs the jobs they
// may see; by name and id.
func (c *Commands) completeJobs(ctx context.Context, v Invocation, m *matcher) {
	if c.d.Jobs == nil {
		return
	}
	var jobs []scheduler.Job
	var err error
	if v.Sub == "runs" {
		jobs, err = c.d.Jobs.List(ctx, v.actor())
	} else {
		jobs, err = c.d.Jobs.Operable(ctx, v.actor())
	}
	if err != nil {
		return // nothing to suggest; the command itself says why
	}
	for _, j := range jobs {
		if m.here && !ownRoom(j, v.Conversation) {
			continue
		}
		name := fmt.Sprintf("%s (%s) · %s", j.Name, j.ID, c.d.Jobs.Describe(j))
		if m.matches(name, j.ID) {
			m.add(name, j.ID)
		}
	}
}

// durations are /session's suggested durations.
var durations = []string{"off", "30m", "1h", "6h", "12h", "24h", "72h", "168h"}

// completeDurations: what was typed, when it is a valid duration, then
// the usual ones.
func completeDurations(m *matcher) {
	if m.typed != "" {
		if _, err := parseDuration(m.typed, Platform{}); err == nil {
			m.add(m.typed, m.typed)
		}
	}
	for _, d := range durations {
		if m.matches(d, d) {
			m.add(d, d)
		}
	}
}
