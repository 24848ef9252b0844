package command

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
)

// focus binds this thread (or a new child thread when run in a channel) to
// a subagent by label or to a session key.
func (c *Commands) focus(ctx context.Context, v Invocation) (Reply, error) {
	p := v.Platform
	if !p.ThreadBindings {
		return Reply{}, userErrf("Thread bindings are disabled (set %s: true).", p.ThreadBindingsSetting)
	}
	target := v.Str("target")
	if target == "" {
		return Reply{}, userErrf("Usage: %s %s", p.Command("focus"), p.option("target", "<subagent-label|session-key>"))
	}
	if name, ok := strings.CutPrefix(target, "acp:"); ok && c.d.ACP != nil && c.d.ACP.Has(name) {
		return c.startACP(ctx, v, name, "")
	}
	info, ok := c.findSession(target)
	if !ok {
		return Reply{}, userErrf("Unable to resolve focus target: %s", target)
	}
	if err := c.d.Authority.MayFocus(ctx, v.actor(), authz.FocusTarget{Key: info.Key, Kind: string(info.Kind),
		Conversation: info.Requester, SpawnedBy: info.SpawnedBy}); err != nil {
		return Reply{}, userErrf("%s", Refusal(err))
	}
	if authz.IsDM(v.Conversation) {
		return Reply{}, userErrf("%s must be run in %s.", p.Command("focus"), p.SharedPlace)
	}
	if cur, bound := c.d.Bindings.ResolveByConversation(v.Conversation); bound && !c.mayChange(ctx, v, cur) {
		return Reply{}, userErrf("Only %s can refocus this conversation.", p.mention(cur.BoundBy))
	}
	kind := binding.KindSession
	if info.Kind == session.KindSubagent {
		kind = binding.KindSubagent
	}
	conv := v.Conversation
	created := false
	if conv.ParentConversationID == "" { // a channel: bind a new child thread
		th, err := c.d.Threads.CreateThread(ctx, conv, truncateRunes("🤖 "+firstNonEmpty(info.Label, info.AgentID), 100))
		if err != nil {
			return Reply{}, fmt.Errorf("focus: %w", err)
		}
		conv, created = th, true
	}
	// A session is bound to one conversation at a time: Bind moves it
	// here and the old thread is told where it went.
	var moved []string
	for _, b := range c.d.Bindings.ListBySession(info.Key) {
		if b.Conversation.Key() != conv.Key() {
			moved = append(moved, p.link(b.Conversation))
		}
	}
	_, err := c.d.Bindings.Bind(ctx, binding.BindInput{TargetSessionKey: info.Key, TargetKind: kind, Conversation: conv, AgentID: info.AgentID,
		Label: info.Label, BoundBy: v.UserID})
	if err != nil {
		return Reply{}, fmt.Errorf("focus: %w", err)
	}
	from := ""
	if len(moved) > 0 {
		from = " It was bound to " + strings.Join(moved, ", ") + " before; it is bound here only now."
	}
	if created {
		return Reply{Text: fmt.Sprintf("✅ Created thread %s and bound it to %s (%s).%s", p.link(conv), info.Key, kind, from), Public: true}, nil
	}
	return Reply{Text: fmt.Sprintf("✅ Bound this thread to %s (%s).%s", info.Key, kind, from), Public: true}, nil
}

// mayChange: the binder, a system binding, or an operator of the bound
// conversation's server (the one authority rule, core/authz, which the
// model's tools ask too).
func (c *Commands) mayChange(ctx context.Context, v Invocation, rec binding.Record) bool {
	return rec.BoundBy == "" || rec.BoundBy == "system" || rec.BoundBy == v.UserID || c.d.Authority.Operator(ctx, v.actor(), rec.Conversation)
}

func (c *Commands) unbind(ctx context.Context, v Invocation, verb string) (Reply, error) {
	rec, ok := c.d.Bindings.ResolveByConversation(v.Conversation)
	if !ok {
		return Reply{Text: "ℹ️ This conversation is not currently bound."}, nil
	}
	if !c.mayChange(ctx, v, rec) {
		return Reply{}, userErrf("Only %s can %s this conversation.", v.Platform.mention(rec.BoundBy), verb)
	}
	if _, err := c.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: binding.ReasonManual}); err != nil {
		return Reply{}, fmt.Errorf("%s: %w", verb, err)
	}
	return Reply{Text: "✅ Conversation unbound; messages here go to the channel's own agent again."}, nil
}

// agents lists the subagent runs of this conversation's session and where
// each is bound.
func (c *Commands) agents(v Invocation) Reply {
	key, _, bound := c.d.Outbound.SessionFor(v.Conversation)
	runs := c.d.Sessions.Sessions(func(in session.Info) bool {
		return in.Kind == session.KindSubagent && (in.Parent == key || in.Requester.Key() == v.Conversation.Key())
	})
	var b strings.Builder
	if c.d.Agents != nil {
		r := c.d.Agents.Resolve(v.Conversation)
		if bound {
			fmt.Fprintf(&b, "answers here: the bound session `%s` (%s ends the binding; unbound, agent `%s` answers: %s)\n", key, v.Platform.Command("unfocus"), r.Agent, r.Why())
		} else {
			fmt.Fprintf(&b, "answers here: agent `%s`, because %s\n", r.Agent, r.Why())
		}
	}
	b.WriteString("agents:\n-----\n")
	if len(runs) == 0 {
		b.WriteString("(none)\n")
	}
	for i, in := range runs {
		where := "unbound"
		if bs := c.d.Bindings.ListBySession(in.Key); len(bs) > 0 {
			where = "thread " + v.Platform.link(bs[0].Conversation)
		} else if in.Thread != "" {
			where = "thread " + in.Thread + " (binding ended)"
		}
		fmt.Fprintf(&b, "%d. %s (%s) — %s, `%s`\n", i+1, in.Label, where, in.Status, in.Key)
		if in.Status == session.StatusUndeliver {
			fmt.Fprintf(&b, "   result kept: %s\n", truncateRunes(in.Result, 300))
		}
	}
	return Reply{Text: b.String()}
}

// session shows or sets this conversation's binding lifecycle, or ends it.
func (c *Commands) session(ctx context.Context, v Invocation) (Reply, error) {
	if v.Sub == "unbind" {
		return c.unbind(ctx, v, "unbind")
	}
	rec, ok := c.d.Bindings.ResolveByConversation(v.Conversation)
	if !ok {
		return Reply{Text: "ℹ️ This conversation is not currently bound."}, nil
	}
	raw := v.Str("duration")
	what, cur := "Idle timeout", rec.IdleTimeout
	if v.Sub == "max-age" {
		what, cur = "Max age", rec.MaxAge
	}
	if raw == "" {
		if cur == 0 {
			return Reply{Text: fmt.Sprintf("ℹ️ %s is currently disabled for this bound session.", what)}, nil
		}
		return Reply{Text: fmt.Sprintf("ℹ️ %s active (%s, next auto-unbind at %s).", what, session.FormatDuration(cur), rec.ExpiresAt().UTC().Format(time.RFC3339))}, nil
	}
	if !c.mayChange(ctx, v, rec) {
		return Reply{}, userErrf("Only %s can update session lifecycle settings for this conversation.", v.Platform.mention(rec.BoundBy))
	}
	d, err := parseDuration(raw, v.Platform)
	if err != nil {
		return Reply{}, err
	}
	var idle, maxAge *time.Duration
	if v.Sub == "max-age" {
		maxAge = &d
	} else {
		idle = &d
	}
	// Only this conversation's binding: other conversations bound to the
	// same session (a store from before bindings moved) belong to whoever
	// bound them.
	if _, err := c.d.Bindings.SetTimeouts(ctx, rec.ID, idle, maxAge); err != nil {
		return Reply{}, fmt.Errorf("set %s: %w", strings.ToLower(what), err)
	}
	if d == 0 {
		return Reply{Text: fmt.Sprintf("✅ %s disabled for this conversation's binding.", what)}, nil
	}
	return Reply{Text: fmt.Sprintf("✅ %s set to %s for this conversation's binding.", what, session.FormatDuration(d))}, nil
}

// parseDuration reads /session durations: off|0 disables, a bare number is
// hours, else a Go duration or Nd for days. A bad one is a user error with
// the usage in p's syntax.
func parseDuration(s string, p Platform) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "off", "disable", "disabled", "none", "0":
		return 0, nil
	}
	// Every form gets the same bounds (1 minute to 1 year).
	var d time.Duration
	var err error
	if n, perr := strconv.ParseFloat(s, 64); perr == nil && n > 0 {
		d = time.Duration(n * float64(time.Hour))
	} else if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, perr := strconv.ParseFloat(days, 64); perr == nil && n > 0 {
			d = time.Duration(n * 24 * float64(time.Hour))
		} else {
			err = perr
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Minute || d > 365*24*time.Hour {
		return 0, userErrf("Usage: %s | %s | %s (example: %s)", p.Command("session", "idle", "<duration|off>"),
			p.Command("session", "max-age", "<duration|off>"), p.Command("session", "unbind"), p.Command("session", "idle", "24h"))
	}
	return d, nil
}
