package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	recall "github.com/agentbot/agentbot/core/memory"
)

var _ recall.Feed = (*Store)(nil)

// The recall change queue (bucketMemChanges): big-endian uint64 position
// (the bucket's sequence) -> big-endian uint64 seq followed by the session
// key. Append and Erase queue a change in their own transaction, so the
// index misses no change, whatever crashes.

func queueChange(tx *bbolt.Tx, key string, seq uint64) error {
	b := tx.Bucket(bucketMemChanges)
	if b == nil {
		return fmt.Errorf("bolt: bucket %q missing", bucketMemChanges)
	}
	pos, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(u64(pos), append(u64(seq), key...))
}

// Pending returns up to limit queued transcript changes, oldest first.
func (s *Store) Pending(ctx context.Context, limit int) ([]recall.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []recall.Change
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketMemChanges).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) < 8 {
				return fmt.Errorf("bolt: recall change %d is malformed", getU64(k))
			}
			out = append(out, recall.Change{Pos: getU64(k), Seq: getU64(v[:8]), Key: string(v[8:])})
		}
		return nil
	})
	return out, err
}

// Done removes the changes at positions from the queue.
func (s *Store) Done(ctx context.Context, positions []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commit.do(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketMemChanges)
		for _, p := range positions {
			if err := b.Delete(u64(p)); err != nil {
				return err
			}
		}
		return nil
	})
}
