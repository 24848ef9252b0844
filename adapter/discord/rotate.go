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
func (a *Adapter) reidentify(ctx context.Context) {
	old := a.session()
	prev := strings.TrimPrefix(old.Token, "Bot ") // set at construction, never written since
	s, err := a.newSession()
	if err != nil {
		a.log.Error().Err(err).Msg("discord: token rotated, but no new gateway session")
		return
	}
	a.closeForGood(old)
	if a.open(ctx, s) {
		a.log.Info().Msg("discord: token rotated: the gateway identified with the new token")
		return
	}
	if ctx.Err() != nil {
		return
	}
	a.log.Error().Msg("discord: the gateway refused the rotated token; identifying again with the previous one")
	back, err := a.newSessionWith(prev)
	if err != nil {
		a.log.Error().Err(err).Msg("discord: no gateway session for the previous token")
		return
	}
	if !a.open(ctx, back) && ctx.Err() == nil {
		a.log.Error().Msg("discord: the gateway refused the previous token too; the bot is offline until the next reload")
	}
}

// open connects a new session and makes it the adapter's on success.
func (a *Adapter) open(ctx context.Context, s *discordgo.Session) bool {
	a.register(s, make(chan struct{}, 1))
	if err := a.connect(ctx, s); err != nil {
		if ctx.Err() == nil {
			a.log.Error().Err(err).Msg("discord: connect the gateway")
		}
		return false
	}
	a.mu.Lock()
	a.s = s
	a.mu.Unlock()
	return true
}

// closeForGood closes a session that must not come back: discordgo's
// heartbeat or reader goroutine, failing on the closing socket, would
// otherwise reconnect it (and two sessions would handle every event). The
// flag is read only by reconnect, after Close took the session lock.
func (a *Adapter) closeForGood(s *discordgo.Session) {
	s.Lock()
	s.ShouldReconnectOnError = false
	s.Unlock()
	if err := s.Close(); err != nil {
		a.log.Warn().Err(err).Msg("discord: close the gateway session of the old token")
	}
}
