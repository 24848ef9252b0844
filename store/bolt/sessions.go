package bolt

import (
	"context"
	"errors"

	"go.etcd.io/bbolt"

	sess "github.com/agentbot/agentbot/core/session"
)

var (
	_ sess.Store = (*Store)(nil)

	sessionInfos = jsonBucket[sess.Info]{name: bucketSessions}
	webhooks     = jsonBucket[webhookRecord]{name: bucketWebhooks}
)

// PutSessionInfo inserts or replaces a session registry record by key.
func (s *Store) PutSessionInfo(ctx context.Context, in sess.Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if in.Key == "" {
		return errors.New("bolt: session with empty key")
	}
	// Group commit: a turn records its owed message before and after it runs.
	return s.commit.do(func(tx *bbolt.Tx) error { return sessionInfos.put(tx, in.Key, in) })
}

// SessionInfos returns every session registry record.
func (s *Store) SessionInfos(ctx context.Context) ([]sess.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []sess.Info
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = sessionInfos.all(tx)
		return err
	})
	return out, err
}

// webhookRecord is a channel's webhook credentials, kept so the bot reuses
// one webhook per parent channel across bindings and restarts.
type webhookRecord struct {
	ChannelID string `json:"channelId"`
	ID        string `json:"id"`
	Token     string `json:"token"`
}

// PutWebhook stores the webhook of a channel.
func (s *Store) PutWebhook(ctx context.Context, channelID, id, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return webhooks.put(tx, channelID, webhookRecord{ChannelID: channelID, ID: id, Token: token})
	})
}

// Webhook returns the stored webhook of a channel.
func (s *Store) Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", false, err
	}
	var w webhookRecord
	err = s.db.View(func(tx *bbolt.Tx) error {
		var err error
		w, ok, err = webhooks.get(tx, channelID)
		return err
	})
	return w.ID, w.Token, ok, err
}

// DeleteWebhook forgets a channel's webhook (after Unknown Webhook).
func (s *Store) DeleteWebhook(ctx context.Context, channelID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error { return webhooks.delete(tx, channelID) })
}
