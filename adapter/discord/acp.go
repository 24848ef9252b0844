package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
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
func (a *Adapter) cmdStartACP(ctx context.Context, v invocation, name, task string) (reply, error) {
	if !a.opt.ThreadBindings {
		return reply{}, userErrf("Thread bindings are disabled (set discord.threadBindings.enabled: true).")
	}
	if strings.HasPrefix(v.conv.ConversationID, "user:") {
		return reply{}, userErrf("An external agent is bound to a thread: run this in a server channel or thread.")
	}
	if cur, bound := a.d.Bindings.ResolveByConversation(v.conv); bound && v.conv.ParentConversationID != "" && !a.mayChange(v, cur) {
		return reply{}, userErrf("Only <@%s> can rebind this thread.", cur.BoundBy)
	}
	res, err := a.d.ACP.Start(ctx, acp.StartRequest{Agent: name, Task: task, Where: v.conv, UserID: v.userID})
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
func (a *Adapter) acpBinding(conv binding.ConversationRef) (binding.Record, bool) {
	if a.d.ACP == nil {
		return binding.Record{}, false
	}
	rec, ok := a.d.Bindings.ResolveByConversation(conv)
	return rec, ok && rec.TargetKind == binding.KindACP
}

// cmdStopACP sends session/cancel for the bound ACP session's turn.
func (a *Adapter) cmdStopACP(ctx context.Context, v invocation, rec binding.Record) (reply, error) {
	text, err := a.d.ACP.Stop(ctx, rec, v.userID)
	if authz.IsRefusal(err) {
		return reply{}, userErrf("%s", refusalText(err))
	}
	if err != nil {
		return reply{}, err
	}
	return reply{text: text}, nil
}

// LiveMessages implements acp.Live and acp.Notifier over the outbound
// send path: a post goes through Outbound (outbox, nonce, one send lock
// per conversation) as a turn's own message, so Outbound writes no entry -
// the turn writes it once with the final text; edits go straight to the
// message. It is meant to be replaced by the shared streaming mechanism.
type LiveMessages struct{ a *Adapter }

// Live returns the adapter's live-message implementation.
func (a *Adapter) Live() LiveMessages { return LiveMessages{a} }

var (
	_ acp.Live     = LiveMessages{}
	_ acp.Notifier = LiveMessages{}
)

// Post sends text (then adds buttons, which Outbound's deliveries do not
// carry, by an edit) and returns the message id.
func (l LiveMessages) Post(ctx context.Context, conv binding.ConversationRef, deliveryID, text string, buttons []acp.Button) (string, error) {
	key, _, _ := l.a.d.Outbound.SessionFor(conv)
	res, err := l.a.d.Outbound.Deliver(ctx, delivery.Delivery{ID: deliveryID, Target: conv, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceTurn, TurnSessionKey: key}},
		func(context.Context, delivery.Receipt) error { return nil })
	if err != nil {
		return "", err
	}
	if len(res.MessageIDs) == 0 {
		return "", fmt.Errorf("live post %s: no message id", deliveryID)
	}
	id := res.MessageIDs[0]
	if len(buttons) > 0 {
		if err := l.Edit(ctx, conv, id, text, buttons); err != nil {
			return id, err
		}
	}
	return id, nil
}

// Edit replaces a live message's text and buttons.
func (l LiveMessages) Edit(ctx context.Context, conv binding.ConversationRef, messageID, text string, buttons []acp.Button) error {
	a := l.a
	s := a.session()
	if s == nil {
		return fmt.Errorf("edit %s: %w", messageID, delivery.ErrTransient)
	}
	channelID, err := a.channelFor(ctx, s, conv.ConversationID)
	if err != nil {
		return err
	}
	comps := buttonRows(buttons)
	content := truncateRunes(text, MaxMessageLen)
	return a.retry(ctx, func() error {
		_, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: messageID, Channel: channelID, Content: &content,
			Components: &comps, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
		return err
	})
}

// Notify posts a message that Outbound writes into the conversation's
// transcript (an intro or a notice).
func (l LiveMessages) Notify(ctx context.Context, conv binding.ConversationRef, deliveryID, text string, source transcript.Source, agentID string) error {
	_, err := l.a.d.Outbound.Deliver(ctx, delivery.Delivery{ID: deliveryID, Target: conv, Text: text,
		Producer: delivery.Producer{Source: source, AgentID: agentID}}, nil)
	return err
}

// buttonRows lays buttons out in rows of five.
func buttonRows(buttons []acp.Button) []discordgo.MessageComponent {
	out := []discordgo.MessageComponent{}
	var row []discordgo.MessageComponent
	for i, b := range buttons {
		style := discordgo.PrimaryButton
		if b.Danger {
			style = discordgo.DangerButton
		}
		row = append(row, discordgo.Button{CustomID: b.ID, Label: b.Label, Style: style})
		if len(row) == 5 || i == len(buttons)-1 {
			out = append(out, discordgo.ActionsRow{Components: row})
			row = nil
		}
	}
	return out
}
