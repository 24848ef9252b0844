package discord

import "context"

// reidentify applies a rotated token to the gateway (docs/DECISIONS.md):
// a new discordgo session, built with the newest token, replaces the
// running one. The running session's fields are never changed (its
// goroutines read them unlocked), and it is closed before the new one
// identifies, so no event is handled twice: messages sent in between are
// read back by the catch-up that runs at the new session's READY.
//
// If the gateway refuses the new token (close 4004, e.g. a typo in the
// reloaded config), the old session is reopened: it resumes with the token
// it identified with (its missed events are replayed) and the bot stays
// online; the error is logged. REST calls use the new token either way.
func (a *Adapter) reidentify(ctx context.Context) {
	old := a.session()
	s, err := a.newSession()
	if err != nil {
		a.log.Error().Err(err).Msg("discord: token rotated, but no new gateway session")
		return
	}
	readyCh := make(chan struct{}, 1)
	a.register(s, readyCh)
	if err := old.Close(); err != nil {
		a.log.Warn().Err(err).Msg("discord: close the gateway session of the old token")
	}
	if err := a.connect(ctx, s); err != nil {
		if ctx.Err() != nil {
			return
		}
		a.log.Error().Err(err).Msg("discord: the gateway refused the rotated token; keeping the session of the previous token")
		if err := a.connect(ctx, old); err != nil {
			a.log.Error().Err(err).Msg("discord: reopen the previous gateway session")
		}
		return
	}
	a.mu.Lock()
	a.s = s
	a.mu.Unlock()
	a.log.Info().Msg("discord: token rotated: the gateway identified with the new token")
}
