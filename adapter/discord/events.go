package discord

import (
	"context"

	"github.com/agentbot/agentbot/core/lane"
)

// newLanes returns the conversation lanes gateway event work runs on, off
// discordgo's read loop, so the gateway never blocks on the store or the
// network: one conversation's events (a channel, thread or DM channel id)
// run one at a time in arrival order, different conversations in parallel
// (core/lane).
func (g *Gateway) newLanes() *lane.Lanes {
	return lane.New(lane.Options{}, lane.Deps{Context: g.workCtx, Log: g.log})
}

// push queues an event's work on its conversation's lane; an event refused
// (the bot is stopping, or the conversation's queue is full) is logged.
func (g *Gateway) push(conversation, name string, f func(context.Context)) {
	err := g.events.Push(conversation, name, func(ctx context.Context) {
		defer g.recoverHandler(name)
		f(ctx)
	})
	if err != nil {
		g.log.Warn().Err(err).Str("channel", conversation).Msg("discord event dropped")
	}
}
