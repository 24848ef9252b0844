package bolt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/delivery"
)

// DeliveryPrune is what PruneDeliveries removed (or, dry, would remove):
// outbox records and the bytes of their keys and values.
type DeliveryPrune struct {
	Rows  int
	Bytes int64
}

// pruneChunk bounds one transaction of PruneDeliveries (a long write
// transaction would hold up every turn's writes).
var pruneChunk = 5000

// PruneDeliveries deletes the outbox records created before before whose
// state is final (delivered or failed); pending and sent records are never
// touched (a restart still finishes them). With dry it only counts. It
// walks the time index from the oldest key, so its cost is the rows it
// removes, and commits in chunks so writers are never held up for long.
// The file does not shrink: freed pages are reused, and `bot compact`
// returns them to the file system.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, dry bool) (DeliveryPrune, error) {
	var total DeliveryPrune
	limit := timeKey(before, "")
	var from []byte
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var chunk DeliveryPrune
		var keys [][]byte
		done := false
		fn := func(tx *bbolt.Tx) error {
			chunk = DeliveryPrune{}
			idx, recs := tx.Bucket(bucketDelivByTime), tx.Bucket(bucketDeliveries)
			if idx == nil || recs == nil {
				return fmt.Errorf("bolt: delivery buckets missing")
			}
			c := idx.Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			for ; k != nil; k, v = c.Next() {
				if bytes.Compare(k[:timeKeyLen], limit) >= 0 {
					done = true
					return nil
				}
				if st := delivery.PendingState(v); st != delivery.StateDelivered && st != delivery.StateFailed {
					continue
				}
				if chunk.Rows == pruneChunk {
					from = bytes.Clone(k)
					return nil
				}
				id := k[timeKeyLen:]
				rec := recs.Get(id)
				chunk.Rows++
				chunk.Bytes += int64(len(k) + len(v) + len(id) + len(rec))
				if !dry {
					// Deleted after the walk: deleting under a cursor can skip keys.
					keys = append(keys, bytes.Clone(k))
				}
			}
			done = true
			return nil
		}
		del := func(tx *bbolt.Tx) error {
			keys = keys[:0]
			if err := fn(tx); err != nil {
				return err
			}
			idx, recs := tx.Bucket(bucketDelivByTime), tx.Bucket(bucketDeliveries)
			for _, k := range keys {
				if err := recs.Delete(k[timeKeyLen:]); err != nil {
					return err
				}
				if err := idx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		if dry {
			err = s.db.View(fn)
		} else {
			err = s.db.Update(del)
		}
		if err != nil {
			return total, fmt.Errorf("prune deliveries: %w", err)
		}
		total.Rows += chunk.Rows
		total.Bytes += chunk.Bytes
		if done {
			return total, nil
		}
	}
}

// FileSize is the store file's size in bytes.
func (s *Store) FileSize() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", s.path, err)
	}
	return fi.Size(), nil
}
