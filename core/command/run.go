package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
)

// spawn starts a subagent (or an external agent: agent names an ACP one).
func (c *Commands) spawn(ctx context.Context, v Invocation) (Reply, error) {
	p := v.Platform
	if name := v.Str("agent"); c.d.ACP != nil && c.d.ACP.Has(name) {
		return c.startACP(ctx, v, name, v.Str("task"))
	}
	// A subagent spends the model like a turn: the platform's access
	// policy applies to all but operators.
	if v.Admit != nil && !c.d.Authority.Operator(ctx, v.actor(), v.Conversation) {
		if msg := v.Admit(ctx); msg != "" {
			return Reply{}, userErrf("%s", msg)
		}
	}
	res, err := c.d.Sessions.Spawn(ctx, session.SpawnRequest{Task: v.Str("task"), Label: v.Str("label"), AgentID: v.Str("agent"),
		Thread: v.Bool("thread"), Requester: v.Conversation, RequestedBy: v.UserID})
	switch {
	case errors.Is(err, session.ErrEmptyTask):
		return Reply{}, userErrf("Give the subagent a task, e.g. %s %s.", p.Command("spawn"), p.option("task", "summarise this channel"))
	case errors.Is(err, session.ErrUnknownAgent):
		return Reply{}, userErrf("There is no agent %q; leave agent empty for the default.", v.Str("agent"))
	case errors.Is(err, session.ErrTooManySubagents):
		return Reply{}, userErrf("Too many subagents are running; wait for one to finish. (%v)", err)
	case errors.Is(err, delivery.ErrForbidden):
		return Reply{}, userErrf("I may not create a thread here: give me %s, or run %s with %s.", p.ThreadPermissions, p.Command("spawn"), p.option("thread", "false"))
	case errors.Is(err, delivery.ErrTransient):
		return Reply{}, userErrf("%s did not answer in time; nothing was started. Try again in a moment.", p.Name)
	case err != nil:
		return Reply{}, fmt.Errorf("spawn: %w", err)
	}
	text := fmt.Sprintf("Started subagent **%s** (`%s`)", res.Label, res.Key)
	if res.Thread != nil {
		text += " in " + p.link(*res.Thread)
	} else if res.NoThreadReason != "" {
		text += " without a thread (" + res.NoThreadReason + ")"
	}
	return Reply{Text: text + ".", Public: true}, nil
}

// stop ends this conversation's running turn, or the named subagent's run
// (its model call is cancelled), or the bound external agent's turn. One's
// own run, or an operator.
func (c *Commands) stop(ctx context.Context, v Invocation) (Reply, error) {
	target := v.Str("target")
	if rec, ok := c.acpBinding(v.Conversation); ok && target == "" {
		return c.stopACP(ctx, v, rec)
	}
	var key, what string
	// where is the run's conversation, whose operators may stop it: this
	// one, or the named session's (a subagent's requester).
	where := v.Conversation
	idle := "ℹ️ Nothing is running in this conversation."
	if target == "" {
		key, _, _ = c.d.Outbound.SessionFor(v.Conversation)
		what = "this conversation's turn"
	} else {
		info, ok := c.findSession(target)
		if !ok {
			return Reply{}, userErrf("Nothing is named %s: give a subagent label or a session key (see %s).", target, v.Platform.Command("agents"))
		}
		key, what, where = info.Key, "`"+info.Key+"`", info.Requester
		if info.Label != "" {
			what = "**" + info.Label + "**"
		}
		idle = "ℹ️ " + what + " is not running."
	}
	run, ok := c.d.Sessions.Running(key)
	if !ok {
		return Reply{Text: idle}, nil
	}
	if err := c.d.Authority.MayStop(ctx, v.actor(), run.Owner, where, what); err != nil {
		return Reply{}, userErrf("%s", Refusal(err))
	}
	if !c.d.Sessions.Stop(run) {
		return Reply{Text: "ℹ️ It had already finished."}, nil
	}
	return Reply{Text: "⏹️ Stopped " + what + "."}, nil
}

// findSession is the session named by key, else the newest with that label.
func (c *Commands) findSession(target string) (session.Info, bool) {
	if in, ok := c.d.Sessions.Info(target); ok {
		return in, true
	}
	matches := c.d.Sessions.Sessions(func(in session.Info) bool { return in.Label == target })
	if len(matches) == 0 {
		return session.Info{}, false
	}
	return matches[len(matches)-1], true
}
