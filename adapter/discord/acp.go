package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// ACP is what the adapter needs of the external-agent manager (package
// acp): /spawn agent:<acp name>, /focus acp:<name>, /stop in a bound
// thread, and permission buttons.
type ACP interface {
	Has(name string) bool
	Start(ctx context.Context, req acp.StartRequest) (acp.StartResult, error)
	Stop(ctx context.Context, rec binding.Record, userID string) (string, error)
	Choose(ctx context.Context, customID, userID string, where binding.ConversationRef) string
}

// cmdStartACP binds a thread to a new session of an ACP agent.
func (g *Gateway) cmdStartACP(ctx context.Context, v invocation, name, task string) (reply, error) {
	if !g.opt.ThreadBindings {
		return reply{}, userErrf("Thread bindings are disabled (set discord.threadBindings.enabled: true).")
	}
	if strings.HasPrefix(v.conv.ConversationID, "user:") {
		return reply{}, userErrf("An external agent is bound to a thread: run this in a server channel or thread.")
	}
	if cur, bound := g.d.Bindings.ResolveByConversation(v.conv); bound && v.conv.ParentConversationID != "" && !g.mayChange(v, cur) {
		return reply{}, userErrf("Only <@%s> can rebind this thread.", cur.BoundBy)
	}
	res, err := g.d.ACP.Start(ctx, acp.StartRequest{Agent: name, Task: task, Where: v.conv, UserID: v.userID})
	switch {
	case authz.IsRefusal(err):
		return reply{}, userErrf("%s", refusalText(err))
	case errors.Is(err, acp.ErrTooMany):
		return reply{}, userErrf("Too many %s sessions are running; wait for one to go idle.", name)
	case errors.Is(err, delivery.ErrForbidden):
		return reply{}, userErrf("I may not create a thread here: give me Create Public Threads and Send Messages in Threads in this channel.")
	case errors.Is(err, delivery.ErrTransient):
		return reply{}, userErrf("Discord did not answer in time; nothing was started. Try again in a moment.")
	case err != nil:
		return reply{}, err
	}
	if res.Created {
		return reply{text: fmt.Sprintf("✅ Started **%s** in <#%s> (session `%s`).", name, res.Thread.ConversationID, res.SessionKey), public: true}, nil
	}
	return reply{text: fmt.Sprintf("✅ Bound this thread to a new **%s** session (`%s`).", name, res.SessionKey), public: true}, nil
}

// acpBinding is the conversation's binding when it targets an ACP session.
func (g *Gateway) acpBinding(conv binding.ConversationRef) (binding.Record, bool) {
	if g.d.ACP == nil {
		return binding.Record{}, false
	}
	rec, ok := g.d.Bindings.ResolveByConversation(conv)
	return rec, ok && rec.TargetKind == binding.KindACP
}

// cmdStopACP sends session/cancel for the bound ACP session's turn.
func (g *Gateway) cmdStopACP(ctx context.Context, v invocation, rec binding.Record) (reply, error) {
	text, err := g.d.ACP.Stop(ctx, rec, v.userID)
	if authz.IsRefusal(err) {
		return reply{}, userErrf("%s", refusalText(err))
	}
	if err != nil {
		return reply{}, err
	}
	return reply{text: text}, nil
}
