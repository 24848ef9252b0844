package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// ACP is what the commands need of the external coding agents (package
// acp, through a small bridge in cmd/bot: core imports no tool protocol):
// /spawn agent:<acp name>, /focus acp:<name>, and /stop in a thread bound
// to one, /ps there. Start and Stop apply the agents' own authority rules.
type ACP interface {
	Has(name string) bool
	// Startable lists the agents actor may start (what Start would allow).
	Startable(ctx context.Context, actor authz.Actor) []string
	Start(ctx context.Context, req ACPStart) (ACPStarted, error)
	Stop(ctx context.Context, rec binding.Record, userID string) (string, error)
	// Processes lists the bound session's running commands.
	Processes(ctx context.Context, rec binding.Record) (string, error)
}

// ACPStart asks for a new session of an external agent bound to a thread:
// the one the command ran in, or a new one under its channel.
type ACPStart struct {
	Agent  string
	Task   string
	Where  binding.ConversationRef
	UserID string
}

// ACPStarted says where the session was bound.
type ACPStarted struct {
	Thread     binding.ConversationRef
	SessionKey string
	Created    bool // a new thread was created
}

// ErrTooManyACP: the agent's session limit is reached (the ACP bridge
// wraps its own error with it).
var ErrTooManyACP = errors.New("too many agent sessions are running")

// startACP binds a thread to a new session of an ACP agent.
func (c *Commands) startACP(ctx context.Context, v Invocation, name, task string) (Reply, error) {
	p := v.Platform
	if !p.ThreadBindings {
		return Reply{}, userErrf("Thread bindings are disabled (set %s: true).", p.ThreadBindingsSetting)
	}
	if authz.IsDM(v.Conversation) {
		return Reply{}, userErrf("An external agent is bound to a thread: run this in %s.", p.SharedPlace)
	}
	if cur, bound := c.d.Bindings.ResolveByConversation(v.Conversation); bound && v.Conversation.ParentConversationID != "" && !c.mayChange(ctx, v, cur) {
		return Reply{}, userErrf("Only %s can rebind this thread.", p.mention(cur.BoundBy))
	}
	res, err := c.d.ACP.Start(ctx, ACPStart{Agent: name, Task: task, Where: v.Conversation, UserID: v.UserID})
	switch {
	case authz.IsRefusal(err):
		return Reply{}, userErrf("%s", Refusal(err))
	case errors.Is(err, ErrTooManyACP):
		return Reply{}, userErrf("Too many %s sessions are running; wait for one to go idle.", name)
	case errors.Is(err, delivery.ErrForbidden):
		return Reply{}, userErrf("I may not create a thread here: give me %s.", p.ThreadPermissions)
	case errors.Is(err, delivery.ErrTransient):
		return Reply{}, userErrf("%s did not answer in time; nothing was started. Try again in a moment.", p.Name)
	case err != nil:
		return Reply{}, fmt.Errorf("start %s: %w", name, err)
	}
	if res.Created {
		return Reply{Text: fmt.Sprintf("✅ Started **%s** in %s (session `%s`).", name, p.link(res.Thread), res.SessionKey), Public: true}, nil
	}
	return Reply{Text: fmt.Sprintf("✅ Bound this thread to a new **%s** session (`%s`).", name, res.SessionKey), Public: true}, nil
}

// acpBinding is the conversation's binding when it targets an ACP session.
func (c *Commands) acpBinding(conv binding.ConversationRef) (binding.Record, bool) {
	if c.d.ACP == nil {
		return binding.Record{}, false
	}
	rec, ok := c.d.Bindings.ResolveByConversation(conv)
	return rec, ok && rec.TargetKind == binding.KindACP
}

// stopACP cancels the bound ACP session's turn (session/cancel).
func (c *Commands) stopACP(ctx context.Context, v Invocation, rec binding.Record) (Reply, error) {
	text, err := c.d.ACP.Stop(ctx, rec, v.UserID)
	if authz.IsRefusal(err) {
		return Reply{}, userErrf("%s", Refusal(err))
	}
	if err != nil {
		return Reply{}, fmt.Errorf("stop the external agent: %w", err)
	}
	return Reply{Text: text}, nil
}

// ps lists the commands the external agent bound to this thread runs
// (ephemeral: the caller's view; each command's own message in the thread
// carries its Kill button).
func (c *Commands) ps(ctx context.Context, v Invocation) (Reply, error) {
	rec, ok := c.acpBinding(v.Conversation)
	if !ok {
		return Reply{}, userErrf("%s lists the commands of an external agent: run it in a thread bound to one (%s).", v.Platform.Command("ps"), v.Platform.Command("spawn"))
	}
	text, err := c.d.ACP.Processes(ctx, rec)
	if err != nil {
		return Reply{}, fmt.Errorf("ps: %w", err)
	}
	return Reply{Text: text}, nil
}
