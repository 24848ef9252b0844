package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store"
)

// A turn's reply waits out a store outage (DESIGN §3 invariant 16). Every
// store call already waits with bounded backoff inside the driver
// (store/postgres, about 30 s); a reply that still failed with
// store.ErrUnavailable is not dropped: the turn delivers it again under
// the same delivery id every replyStoreWait, up to replyStoreRetries
// times (about 5 minutes more). The id makes this safe: a reply that
// reached the chat before the store went away is finished (recorded), not
// posted again.
const (
	replyStoreRetries = 10
	replyStoreWait    = 30 * time.Second
)

// replyWaitingForStore posts a turn's reply (m.reply) and, when that fails
// with store.ErrUnavailable, waits for the store and tries again.
func (m *Manager) replyWaitingForStore(ctx context.Context, t turnInput, text string, source transcript.Source) ([]string, error) {
	ids, err := m.reply(ctx, t, text, source)
	if errors.Is(err, store.ErrUnavailable) {
		return m.replyWhenStoreIsBack(ctx, t, text, source, err)
	}
	return ids, err
}

// replyWhenStoreIsBack retries a turn's reply that failed with
// store.ErrUnavailable (err), waiting on the injected After (Deps.After).
// It gives up when the process stops, when the reply fails for another
// reason, or after the last try; the turn then stays owed in the session
// registry (its finished record was never written) and the next start
// answers it (Resume), so the answer is late, never lost.
func (m *Manager) replyWhenStoreIsBack(ctx context.Context, t turnInput, text string, source transcript.Source, err error) ([]string, error) {
	m.d.Log.Warn().Err(err).Str("session", t.key).Msg("turn reply waits for the store to come back")
	base := m.baseCtx()
	for i := 0; i < replyStoreRetries && errors.Is(err, store.ErrUnavailable); i++ {
		select {
		case <-base.Done():
			return nil, fmt.Errorf("%w (stopping; the next start answers the turn)", err)
		case <-m.d.After(replyStoreWait):
		}
		var ids []string
		if ids, err = m.reply(ctx, t, text, source); err == nil {
			m.d.Log.Info().Str("session", t.key).Int("attempt", i+2).Msg("turn reply delivered after a store outage")
			return ids, nil
		}
	}
	if errors.Is(err, store.ErrUnavailable) {
		return nil, fmt.Errorf("%w (the turn stays owed: the next start answers it)", err)
	}
	return nil, err
}
