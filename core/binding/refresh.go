package binding

import (
	"context"
	"fmt"
	"time"
)

// ByIDStore is optionally implemented by a Store that can read records by
// id; Refresh then reads only the records it was told about instead of
// every record.
type ByIDStore interface {
	// BindingsByID returns the stored records among ids (unknown ids are
	// left out), in no particular order.
	BindingsByID(ctx context.Context, ids ...string) ([]Record, error)
}

// Refresh applies records that another process changed in the store to
// the in-memory index, without writing anything: an active record is
// (re)indexed, an ended or missing one leaves the index (no EndedFunc is
// called: the process that ended it did that). With no ids every record
// is re-read (the periodic fallback when change notices may have been
// missed).
//
// Activity recorded here by Touch is not lost: of the local and the stored
// LastActivityAt the later wins (a still newer local one stays dirty for
// Flush). When two records claim one conversation, the later bound keeps
// it.
//
// Refresh never applies a read older than a local write: Bind, Unbind,
// Sweep and SetTimeouts count their writes, and a read that overlapped one
// is repeated (after a few tries it is done under the lock).
func (s *Service) Refresh(ctx context.Context, ids ...string) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	for range 3 {
		s.mu.RLock()
		w0 := s.writes
		s.mu.RUnlock()
		recs, err := s.read(ctx, ids)
		if err != nil {
			return fmt.Errorf("refresh bindings: %w", err)
		}
		s.mu.Lock()
		if s.writes == w0 {
			s.applyLocked(recs, ids)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.read(ctx, ids)
	if err != nil {
		return fmt.Errorf("refresh bindings: %w", err)
	}
	s.applyLocked(recs, ids)
	return nil
}

// read returns the stored records among ids (all with no ids).
func (s *Service) read(ctx context.Context, ids []string) ([]Record, error) {
	if len(ids) == 0 {
		return s.store.Bindings(ctx)
	}
	if bs, ok := s.store.(ByIDStore); ok {
		return bs.BindingsByID(ctx, ids...)
	}
	all, err := s.store.Bindings(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		want[id] = struct{}{}
	}
	out := all[:0]
	for _, r := range all {
		if _, ok := want[r.ID]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// applyLocked merges recs into the index; ids (all when empty) not among
// recs leave it. s.mu must be held.
func (s *Service) applyLocked(recs []Record, ids []string) {
	seen := make(map[string]struct{}, len(recs))
	for _, r := range recs {
		seen[r.ID] = struct{}{}
		s.applyOneLocked(r)
	}
	if len(ids) == 0 {
		for id, r := range s.idx.byID {
			if _, ok := seen[id]; !ok {
				s.unindex(r)
			}
		}
		return
	}
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			if r := s.idx.byID[id]; r != nil {
				s.unindex(r)
			}
		}
	}
}

func (s *Service) applyOneLocked(r Record) {
	if s.disabled {
		return
	}
	s.ever[r.TargetSessionKey] = struct{}{}
	cur := s.idx.byID[r.ID]
	if r.Status != StatusActive {
		if cur != nil {
			s.unindex(cur)
		}
		return
	}
	r.Conversation = r.Conversation.Normalize()
	_, dirty := s.dirty[r.ID]
	if cur != nil {
		if cur.LastActivityAt.After(r.LastActivityAt) {
			r.LastActivityAt = cur.LastActivityAt // the local Touch is newer
		} else {
			dirty = false // the store already has activity as recent
			delete(s.dirty, r.ID)
		}
		if keyOf(cur.Conversation) == keyOf(r.Conversation) && cur.TargetSessionKey == r.TargetSessionKey {
			*cur = r
			return
		}
		s.unindex(cur)
	}
	if other := s.idx.lookup(r.Conversation); other != nil && other.ID != r.ID {
		if other.BoundAt.After(r.BoundAt) {
			return // a later binding holds the conversation
		}
		s.unindex(other)
	}
	s.index(r)
	if dirty {
		s.dirty[r.ID] = struct{}{}
	}
}

// expiredIDs lists the indexed records expired at now.
func (s *Service) expiredIDs(now time.Time) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for id, r := range s.idx.byID {
		if r.ExpiryReason(now) != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
