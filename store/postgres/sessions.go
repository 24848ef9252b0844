package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	sess "github.com/agentbot/agentbot/core/session"
)

// PutSessionInfo inserts or replaces a session registry record by key.
func (s *Store) PutSessionInfo(ctx context.Context, in sess.Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if in.Key == "" {
		return errors.New("postgres: session with empty key")
	}
	raw, err := encode("session", in.Key, in)
	if err != nil {
		return err
	}
	return s.do(ctx, "put session info", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO session_infos (key, data) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET data = excluded.data`, in.Key, raw)
		return err
	})
}

// SessionInfos returns every session registry record, ordered by key.
func (s *Store) SessionInfos(ctx context.Context) ([]sess.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return queryRecords[sess.Info](ctx, s, "session", `SELECT key, data FROM session_infos ORDER BY key`)
}

// PutWebhook stores the webhook of a channel (one per parent channel, reused
// across bindings, restarts and processes).
func (s *Store) PutWebhook(ctx context.Context, channelID, id, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.do(ctx, "put webhook", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO webhooks (channel_id, webhook_id, token) VALUES ($1, $2, $3)
ON CONFLICT (channel_id) DO UPDATE SET webhook_id = excluded.webhook_id, token = excluded.token`, channelID, id, token)
		return err
	})
}

// Webhook returns the stored webhook of a channel.
func (s *Store) Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", false, err
	}
	err = s.do(ctx, "read webhook", readOnly, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT webhook_id, token FROM webhooks WHERE channel_id = $1`, channelID).Scan(&id, &token)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return id, token, true, nil
}

// DeleteWebhook forgets a channel's webhook (after Unknown Webhook).
func (s *Store) DeleteWebhook(ctx context.Context, channelID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.do(ctx, "delete webhook", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM webhooks WHERE channel_id = $1`, channelID)
		return err
	})
}
