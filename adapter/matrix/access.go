package matrix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
)

// maxSharedRooms bounds how many of the bot's rooms a DM's "shares a room" check reads.
const maxSharedRooms = 100

// Subject is userID writing in conv as core/authz's access policy sees it: the room as the channel (a thread's
// room as its parent), no roles (Matrix has none), and for a DM whether the user is joined to a room the bot
// serves (a DM room excluded) - the "members" DM mode's question.
func (c *Client) Subject(ctx context.Context, conv binding.ConversationRef, userID string) authz.Subject {
	n := conv.Normalize()
	s := authz.Subject{UserID: userID, ChannelID: n.ConversationID, ParentID: n.ParentConversationID}
	if authz.IsDM(n) {
		s.ChannelID, s.ParentID, s.DM = "", "", true
		s.SharesGuild = func() bool { return c.sharesRoom(ctx, userID) }
	}
	return s
}

// sharesRoom reports whether userID is joined to one of the bot's rooms that is not a DM room (a failure: no).
func (c *Client) sharesRoom(ctx context.Context, userID string) bool {
	resp, err := c.bot.JoinedRooms(ctx)
	if err != nil {
		c.log.Warn().Err(classify("matrix: joined rooms", err)).Msg("access: whether a DM's user shares a room is unknown; refused")
		return false
	}
	c.dmMu.Lock()
	_ = c.loadDMs(ctx)
	dms := make(map[string]bool, len(c.dms.byRoom))
	for r := range c.dms.byRoom {
		dms[r] = true
	}
	c.dmMu.Unlock()
	n := 0
	for _, room := range resp.JoinedRooms {
		if dms[room.String()] {
			continue
		}
		if n++; n > maxSharedRooms {
			break
		}
		var m struct {
			Membership string `json:"membership"`
		}
		err := c.bot.StateEvent(ctx, room, event.StateMember, userID, &m)
		if err == nil && m.Membership == string(event.MembershipJoin) {
			return true
		}
		if err != nil && !errors.Is(err, mautrix.MNotFound) {
			c.log.Debug().Err(classify("matrix: membership", err)).Str("room", room.String()).Msg("access: membership unknown")
		}
	}
	return false
}

// admit applies the access gate to a message that would start a turn: operators of the conversation are exempt;
// a refused message gets no reply; the first one over the turn budget gets one short notice (through Outbound, so
// it is in the conversation's transcript), later ones silence until the budget resets.
func (g *Gateway) admit(ctx context.Context, in Inbound, conv binding.ConversationRef) bool {
	if g.d.Gate == nil {
		return true
	}
	if g.d.Operator != nil && g.d.Operator(ctx, authz.Actor{UserID: in.Sender, Where: conv}, conv) {
		return true
	}
	s := g.c.Subject(ctx, conv, in.Sender)
	place := in.RoomID
	if s.DM {
		place = ""
	}
	a := g.d.Gate.Admit(s, place)
	if a.OK {
		return true
	}
	if a.Reason != "" {
		g.log.Info().Str("event", in.EventID).Str("user", in.Sender).Str("reason", a.Reason).Msg("access: message refused")
		return false
	}
	g.log.Info().Str("event", in.EventID).Str("user", in.Sender).Str("scope", a.Limit.Scope).Time("until", a.Limit.Until).Bool("notice", a.Limit.Notify).Msg("access: over the turn budget")
	if a.Limit.Notify {
		_, err := g.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "ratelimit:" + in.EventID, Target: conv, ReplyTo: in.EventID,
			Text:     LimitNotice(g.nameOf(ctx, in.RoomID, in.Sender), g.d.Gate.Limits(), a.Limit, g.d.Clock.Now()),
			Producer: delivery.Producer{Source: transcript.SourceNotice}}, nil)
		if err != nil {
			g.log.Warn().Err(err).Str("event", in.EventID).Msg("rate limit notice not delivered")
		}
	}
	return false
}

// LimitNotice is the one short notice of an exhausted turn budget: when the author can go on.
func LimitNotice(name string, l authz.Limits, d authz.Decision, now time.Time) string {
	wait := max(d.Until.Sub(now).Round(time.Minute), time.Minute)
	what := fmt.Sprintf("%s, you have used your %d turns for %s", name, l.Turns, session.FormatDuration(l.Per))
	if d.Scope == "guild" {
		what = fmt.Sprintf("%s, this room has used its %d turns for %s", name, l.GuildTurns, session.FormatDuration(l.Per))
	}
	return fmt.Sprintf("⏳ %s; you can go on in %s (at %s UTC). Until then I will not answer.", what, session.FormatDuration(wait), d.Until.UTC().Format("15:04"))
}

// AdmitCommand is the gate for a text command that starts model work (a subagent's !spawn) by a caller who is no
// operator (core/command asks the authority first): "" admits, else the refusal shown.
func AdmitCommand(ctx context.Context, c *Client, gate *authz.Gate, conv binding.ConversationRef, userID string, now time.Time) string {
	if gate == nil {
		return ""
	}
	s := c.Subject(ctx, conv, userID)
	place := ""
	if !s.DM {
		place, _, _ = roomOf(conv)
	}
	a := gate.Admit(s, place)
	switch {
	case a.OK:
		return ""
	case a.Reason != "":
		return "You may not start agent work here (access)."
	}
	return LimitNotice(userID, gate.Limits(), a.Limit, now)
}
