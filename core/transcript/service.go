package transcript

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/agentbot/agentbot/core/clock"
)

// Service is the transcript API the rest of the bot uses. It stamps
// entries with the session's current generation and the time, makes Append
// idempotent on delivery ids, and serves History from the tail of the
// store without reading whole sessions.
type Service struct {
	store Store
	clock clock.Clock

	// resetMu orders Reset against Append so no entry is stamped with a
	// generation that a concurrent Reset has just retired.
	resetMu sync.RWMutex
}

// NewService returns a transcript service over store. It does no I/O.
func NewService(store Store, clk clock.Clock) *Service {
	return &Service{store: store, clock: clk}
}

// Append writes e to session key once. With a non-empty DeliveryID, a
// second Append with the same id and text returns the first entry; with
// different text it fails with ErrDeliveryConflict.
func (s *Service) Append(ctx context.Context, key string, e Entry) (Entry, error) {
	if key == "" {
		return Entry{}, fmt.Errorf("append: empty session key")
	}
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	gen, err := s.store.Generation(ctx, key)
	if err != nil {
		return Entry{}, fmt.Errorf("append to %s: %w", key, err)
	}
	e.SessionKey = key
	e.Generation = gen
	if e.At.IsZero() {
		e.At = s.clock.Now()
	}
	if e.MessageIDs == nil {
		e.MessageIDs = []string{}
	}
	stored, existed, err := s.store.Append(ctx, key, e)
	if err != nil {
		return Entry{}, fmt.Errorf("append to %s: %w", key, err)
	}
	if existed && stored.Text != e.Text {
		return stored, fmt.Errorf("append %s to %s: %w", e.DeliveryID, key, ErrDeliveryConflict)
	}
	return stored, nil
}

// History returns up to n of the newest entries of the session's current
// generation, oldest first: what the model sees.
func (s *Service) History(ctx context.Context, key string, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	gen, err := s.store.Generation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", key, err)
	}
	tail, err := s.store.Tail(ctx, key, n)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", key, err)
	}
	// Generations only grow, so the current one is a suffix of the tail.
	i := len(tail)
	for i > 0 && tail[i-1].Generation == gen {
		i--
	}
	return tail[i:], nil
}

// Reset starts a new generation: earlier entries stay in the record but
// leave the model's history. It returns the new generation.
func (s *Service) Reset(ctx context.Context, key string) (int, error) {
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	gen, err := s.store.Generation(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("reset %s: %w", key, err)
	}
	if err := s.store.SetGeneration(ctx, key, gen+1); err != nil {
		return 0, fmt.Errorf("reset %s: %w", key, err)
	}
	return gen + 1, nil
}

// Entries pages through every entry of a session, all generations.
func (s *Service) Entries(ctx context.Context, key string, from uint64, limit int) ([]Entry, error) {
	out, err := s.store.Range(ctx, key, from, limit)
	if err != nil {
		return nil, fmt.Errorf("entries of %s: %w", key, err)
	}
	return out, nil
}

// ByMessageID finds the entry that holds a Discord message id.
func (s *Service) ByMessageID(ctx context.Context, key, messageID string) (Entry, bool, error) {
	e, ok, err := s.store.ByMessageID(ctx, key, messageID)
	if err != nil {
		return Entry{}, false, fmt.Errorf("find message %s in %s: %w", messageID, key, err)
	}
	return e, ok, nil
}

// Sessions lists the session keys that have transcripts, sorted.
func (s *Service) Sessions(ctx context.Context) ([]string, error) {
	keys, err := s.store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	slices.Sort(keys)
	return keys, nil
}

// Exists reports whether the session has any entry.
func (s *Service) Exists(ctx context.Context, key string) (bool, error) {
	tail, err := s.store.Tail(ctx, key, 1)
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", key, err)
	}
	return len(tail) > 0, nil
}
