package memory

import (
	"context"
	"slices"

	recall "github.com/agentbot/agentbot/core/memory"
)

var _ recall.Feed = (*Store)(nil)

// changeQueue is the queue of transcript changes the recall index
// follows; Append and Erase add to it under the store's lock.
type changeQueue struct {
	next uint64
	q    []recall.Change
}

func (c *changeQueue) add(key string, seq uint64) {
	c.next++
	c.q = append(c.q, recall.Change{Pos: c.next, Key: key, Seq: seq})
}

// Pending returns up to limit queued transcript changes, oldest first.
func (s *Store) Pending(ctx context.Context, limit int) ([]recall.Change, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.changes.q[:min(limit, len(s.changes.q))]), nil
}

// Done removes the changes at positions from the queue.
func (s *Store) Done(ctx context.Context, positions []uint64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes.q = slices.DeleteFunc(s.changes.q, func(c recall.Change) bool { return slices.Contains(positions, c.Pos) })
	return nil
}
