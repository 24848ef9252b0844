package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentbot/agentbot/core/usage"
)

var _ usage.Store = (*Usage)(nil)

// Usage is an in-memory usage store (tests and the demo).
type Usage struct {
	mu sync.Mutex
	rs []usage.Record // oldest first; equal times in insertion order
}

// NewUsage returns an empty store.
func NewUsage() *Usage { return &Usage{} }

// AddUsage stores rs, all or none.
func (u *Usage) AddUsage(ctx context.Context, rs ...usage.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u.add(rs...)
	return nil
}

func (u *Usage) add(rs ...usage.Record) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range rs {
		r.At = r.At.Round(0)
		i, _ := slices.BinarySearchFunc(u.rs, r.At, func(e usage.Record, t time.Time) int {
			if e.At.After(t) {
				return 1
			}
			return -1 // equal times: after the existing ones
		})
		u.rs = slices.Insert(u.rs, i, r)
	}
}

// Usage lists the records f selects, oldest first.
func (u *Usage) Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []usage.Record
	for _, r := range u.rs {
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// PruneUsage deletes records older than before.
func (u *Usage) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for n < len(u.rs) && u.rs[n].At.Before(before) {
		n++
	}
	u.rs = slices.Delete(u.rs, 0, n)
	return n, nil
}

// The Store keeps usage records too, so an entry and the usage records of
// the model calls behind it are written together (Entry.Calls), as bbolt
// and PostgreSQL write them in one transaction.

var _ usage.Store = (*Store)(nil)

// AddUsage stores rs, all or none.
func (s *Store) AddUsage(ctx context.Context, rs ...usage.Record) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.use.add(rs...)
	return nil
}

// Usage lists the records f selects, oldest first.
func (s *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.use.Usage(ctx, f)
}

// PruneUsage deletes records older than before.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.use.PruneUsage(ctx, before)
}
