package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/delivery"
)

// Deliveries live in bucketDeliveries (id -> JSON) with a time index in
// bucketDelivByTime: key = timeKey(CreatedAt) + id, value = state. Listing
// walks the index from the end, filters on the value and loads only the
// records it returns.

var deliveries = jsonBucket[delivery.Record]{name: bucketDeliveries}

const timeKeyLen = 12

// timeKey orders times bytewise: seconds since the epoch with the sign bit
// flipped (8 bytes), then nanoseconds (4 bytes). Covers the zero time.
func timeKey(t time.Time, id string) []byte {
	k := make([]byte, timeKeyLen+len(id))
	binary.BigEndian.PutUint64(k, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
	copy(k[timeKeyLen:], id)
	return k
}

// PutDelivery inserts or replaces r by r.Delivery.ID.
func (s *Store) PutDelivery(ctx context.Context, r delivery.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := r.Delivery.ID
	if strings.TrimSpace(id) == "" {
		return errors.New("bolt: delivery with empty id")
	}
	if len(r.MessageIDs) == 0 {
		r.MessageIDs = nil
	}
	if len(r.Delivery.Producer.Meta) == 0 {
		r.Delivery.Producer.Meta = nil
	}
	// Group commit (as Append): every turn writes its delivery two or three
	// times, and one fsync'd transaction each serialised all conversations
	// behind bbolt's single writer. fn may run more than once, in a fresh
	// transaction each time: it reads and writes afresh.
	return s.commit.do(func(tx *bbolt.Tx) error { return putDeliveryTx(tx, r) })
}

// putDeliveryTx is PutDelivery inside a read-write transaction.
func putDeliveryTx(tx *bbolt.Tx, r delivery.Record) error {
	id := r.Delivery.ID
	idx := tx.Bucket(bucketDelivByTime)
	if idx == nil {
		return fmt.Errorf("bolt: bucket %q missing", bucketDelivByTime)
	}
	old, ok, err := deliveries.get(tx, id)
	if err != nil {
		return err
	}
	if ok {
		if err := idx.Delete(timeKey(old.CreatedAt, id)); err != nil {
			return err
		}
	}
	if err := deliveries.put(tx, id, r); err != nil {
		return err
	}
	return idx.Put(timeKey(r.CreatedAt, id), []byte(r.State))
}

// GetDelivery returns the record for id.
func (s *Store) GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return delivery.Record{}, false, err
	}
	if id == "" {
		return delivery.Record{}, false, nil
	}
	var (
		r  delivery.Record
		ok bool
	)
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		r, ok, err = deliveries.get(tx, id)
		return err
	})
	return r, ok, err
}

// Deliveries returns records in state ("" for all), newest CreatedAt first
// (ties: higher ID first), at most limit (0 = no limit).
func (s *Store) Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []delivery.Record{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		idx := tx.Bucket(bucketDelivByTime)
		if idx == nil {
			return fmt.Errorf("bolt: bucket %q missing", bucketDelivByTime)
		}
		c := idx.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if state != "" && string(v) != string(state) {
				continue
			}
			if len(k) < timeKeyLen {
				return fmt.Errorf("bolt: malformed delivery index key %x", k)
			}
			id := string(k[timeKeyLen:])
			r, ok, err := deliveries.get(tx, id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("bolt: delivery index names missing record %q", id)
			}
			out = append(out, r)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
