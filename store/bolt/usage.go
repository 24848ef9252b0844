package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/usage"
)

var _ usage.Store = (*Store)(nil)

// usageKey orders records by time: the instant (Unix nanoseconds) then the
// bucket's sequence, both big-endian.
func usageKey(at time.Time, seq uint64) []byte {
	k := make([]byte, 16)
	copy(k, u64(uint64(at.UnixNano())))
	copy(k[8:], u64(seq))
	return k
}

// usageRaw is a record encoded for the usage bucket.
type usageRaw struct {
	at  time.Time
	raw []byte
}

// encodeUsage encodes rs outside any transaction.
func encodeUsage(rs []usage.Record) ([]usageRaw, error) {
	out := make([]usageRaw, 0, len(rs))
	for _, r := range rs {
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("usage record: %w", err)
		}
		out = append(out, usageRaw{r.At, raw})
	}
	return out, nil
}

// putUsage writes encoded records in tx.
func putUsage(tx *bbolt.Tx, rs []usageRaw) error {
	b := tx.Bucket(bucketUsage)
	for _, r := range rs {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := b.Put(usageKey(r.at, seq), r.raw); err != nil {
			return err
		}
	}
	return nil
}

// AddUsage stores rs in one transaction. It joins the store's group
// commit: a usage write arriving while another write (a transcript entry,
// a delivery) is being made durable commits with the next batch, not with
// its own fsync. The records of a turn's reply ride on its entry's write
// instead (transcript.Entry.Calls, Append).
func (s *Store) AddUsage(ctx context.Context, rs ...usage.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	raws, err := encodeUsage(rs)
	if err != nil {
		return err
	}
	return s.commit.do(func(tx *bbolt.Tx) error { return putUsage(tx, raws) })
}

// Usage lists the records f selects, oldest first.
func (s *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []usage.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		k, v := c.First()
		if !f.Since.IsZero() {
			k, v = c.Seek(usageKey(f.Since, 0))
		}
		for ; k != nil; k, v = c.Next() {
			var r usage.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("usage record %x: %w", k, err)
			}
			if f.Match(r) {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// PruneUsage deletes records older than before.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	end := usageKey(before, 0)
	err := s.db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
