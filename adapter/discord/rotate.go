package discord

import (
	"context"
	"strings"

	"github.com/bwmarrin/discordgo"
)

// reidentify applies a rotated token to the gateway (docs/DECISIONS.md):
// a new discordgo session, built with the newest token, replaces the
// running one. The running session's fields are never changed while it
// runs (its goroutines read them unlocked), and it is closed before the new
// one identifies, so no event is handled twice: messages sent in between
// are read back by the catch-up that runs at the new session's READY.
//
// If the gateway refuses the new token (close 4004, e.g. a typo in the
// reloaded config), a session with the token the gateway accepted before
// identifies instead, so the bot stays online; the error is logged. REST
// calls use the newest token either way.
func (g *Gateway) reidentify(ctx context.Context) {
	old := g.c.session()
	prev := strings.TrimPrefix(old.Token, "Bot ") // set at construction, never written since
	s, err := g.c.newSession()
	if err != nil {
		g.log.Error().Err(err).Msg("discord: token rotated, but no new gateway session")
		return
	}
	g.closeForGood(old)
	if g.open(ctx, s) {
		g.log.Info().Msg("discord: token rotated: the gateway identified with the new token")
		return
	}
	if ctx.Err() != nil {
		return
	}
	g.log.Error().Msg("discord: the gateway refused the rotated token; identifying again with the previous one")
	back, err := g.c.newSessionWith(prev)
	if err != nil {
		g.log.Error().Err(err).Msg("discord: no gateway session for the previous token")
		return
	}
	if !g.open(ctx, back) && ctx.Err() == nil {
		g.log.Error().Msg("discord: the gateway refused the previous token too; the bot is offline until the next reload")
	}
}

// open connects a new session and, on success, makes it the one the Client uses.
func (g *Gateway) open(ctx context.Context, s *discordgo.Session) bool {
	g.register(s, make(chan struct{}, 1))
	if err := g.connect(ctx, s); err != nil {
		if ctx.Err() == nil {
			g.log.Error().Err(err).Msg("discord: connect the gateway")
		}
		return false
	}
	g.c.setSession(s)
	return true
}

// closeForGood closes a session that must not come back: discordgo's
// heartbeat or reader goroutine, failing on the closing socket, would
// otherwise reconnect it (and two sessions would handle every event). The
// flag is read only by reconnect, after Close took the session lock.
func (g *Gateway) closeForGood(s *discordgo.Session) {
	s.Lock()
	s.ShouldReconnectOnError = false
	s.Unlock()
	if err := s.Close(); err != nil {
		g.log.Warn().Err(err).Msg("discord: close the gateway session of the old token")
	}
}
