package bot

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/adapter/matrix"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/session"
	modelusage "github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/metrics"
)

// newMeter maps models.*.price and access.budget onto usage accounting
// over the store; configured operator users are exempt from budgets.
func newMeter(cfg *config.Config, st modelusage.Store, clk clock.Clock, m *metrics.Metrics, log zerolog.Logger) *modelusage.Meter {
	prices := make(map[string]modelusage.Price, len(cfg.Models))
	for name, mc := range cfg.Models {
		prices[name] = modelusage.Price{Input: mc.Price.Input, Output: mc.Price.Output}
	}
	b := cfg.EffectiveAccess().Budget
	return modelusage.New(modelusage.Options{
		Prices: prices,
		Budget: modelusage.Budget{Tokens: int64(b.Tokens), Cost: b.Cost, Per: b.Per, GuildTokens: int64(b.GuildTokens), GuildCost: b.GuildCost},
		Exempt: append(append([]string(nil), cfg.Discord.Operators.Users...), cfg.Matrix.Operators...),
	}, modelusage.Deps{Store: st, Clock: clk, Log: log, Observe: func(r modelusage.Record) {
		m.TokensUsed(r.Model, r.Agent, r.Input, r.Output, r.Cached)
	}})
}

// places asks each conversation's own platform which server or room it
// belongs to.
type places map[string]session.Places

func (p places) Place(ctx context.Context, conv binding.ConversationRef) (string, error) {
	if pl, ok := p[conv.Normalize().Channel]; ok {
		return pl.Place(ctx, conv)
	}
	return "", nil
}

// sessionMeter is the sessions' usage accounting: m, or none when off.
func sessionMeter(m *modelusage.Meter, off bool) session.Meter {
	if off {
		return nil
	}
	return m
}

// pruneUsage applies store.deliveryRetentionDays to usage records at start
// and on every tick until ctx ends.
func (a *App) pruneUsage(ctx context.Context, tick <-chan time.Time) {
	for {
		n, err := a.usage.Prune(ctx, a.cfg.Store.DeliveryRetention())
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Error().Err(err).Msg("usage retention")
		case n > 0:
			a.log.Info().Int("records", n).Int("retentionDays", a.cfg.Store.DeliveryRetentionDays).Msg("deleted usage records past retention")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// places is each platform's answer to "which server or room" (usage
// records, server budgets, /usage).
func (a *App) places() places {
	pl := places{}
	if a.discord != nil {
		pl["discord"] = discordPlaces{a.discord}
	}
	if a.matrix != nil {
		pl["matrix"] = matrixPlaces{}
	}
	return pl
}

// matrixPlaces: a Matrix conversation's place is its room.
type matrixPlaces struct{}

func (matrixPlaces) Place(_ context.Context, conv binding.ConversationRef) (string, error) {
	return matrix.RoomOf(conv), nil
}

// discordPlaces answers from the Discord gateway cache (the guild of a
// served channel or thread; "" for a DM or an uncached conversation).
type discordPlaces struct{ c *discord.Client }

func (p discordPlaces) Place(_ context.Context, conv binding.ConversationRef) (string, error) {
	return p.c.Place(conv).Server, nil
}
