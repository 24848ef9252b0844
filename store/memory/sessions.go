package memory

import (
	"context"
	"errors"
	"sync"

	sess "github.com/agentbot/agentbot/core/session"
)

var _ sess.Store = (*Sessions)(nil)

// Sessions is an in-memory session registry (tests and the demo).
type Sessions struct {
	mu sync.Mutex
	m  map[string]sess.Info
}

// NewSessions returns an empty registry.
func NewSessions() *Sessions { return &Sessions{m: map[string]sess.Info{}} }

// PutSessionInfo inserts or replaces a record by key.
func (s *Sessions) PutSessionInfo(ctx context.Context, in sess.Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if in.Key == "" {
		return errors.New("memory: session with empty key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[in.Key] = in
	return nil
}

// SessionInfos returns every record.
func (s *Sessions) SessionInfos(ctx context.Context) ([]sess.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sess.Info, 0, len(s.m))
	for _, in := range s.m {
		out = append(out, in)
	}
	return out, nil
}

// Webhooks is an in-memory webhook credential store (tests and the demo).
type Webhooks struct {
	mu sync.Mutex
	m  map[string][2]string
}

// NewWebhooks returns an empty store.
func NewWebhooks() *Webhooks { return &Webhooks{m: map[string][2]string{}} }

// PutWebhook stores the webhook of a channel.
func (w *Webhooks) PutWebhook(_ context.Context, channelID, id, token string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[channelID] = [2]string{id, token}
	return nil
}

// Webhook returns the stored webhook of a channel.
func (w *Webhooks) Webhook(_ context.Context, channelID string) (string, string, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.m[channelID]
	return v[0], v[1], ok, nil
}

// DeleteWebhook forgets a channel's webhook.
func (w *Webhooks) DeleteWebhook(_ context.Context, channelID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, channelID)
	return nil
}
