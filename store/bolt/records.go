package bolt

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// jsonBucket is a top-level bucket of JSON records keyed by id. New record
// kinds (jobs, runs, webhooks, ...) get a bucket name in schema.go, a
// migration creating it, and a jsonBucket[T] value.
type jsonBucket[T any] struct {
	name []byte
}

func (b jsonBucket[T]) bucket(tx *bbolt.Tx) (*bbolt.Bucket, error) {
	bk := tx.Bucket(b.name)
	if bk == nil {
		return nil, fmt.Errorf("bolt: bucket %q missing (schema not migrated?)", b.name)
	}
	return bk, nil
}

func (b jsonBucket[T]) put(tx *bbolt.Tx, id string, v T) error {
	bk, err := b.bucket(tx)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bolt: encode %s %q: %w", b.name, id, err)
	}
	return bk.Put([]byte(id), raw)
}

func (b jsonBucket[T]) get(tx *bbolt.Tx, id string) (T, bool, error) {
	var v T
	bk, err := b.bucket(tx)
	if err != nil {
		return v, false, err
	}
	raw := bk.Get([]byte(id))
	if raw == nil {
		return v, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, false, fmt.Errorf("bolt: decode %s %q: %w", b.name, id, err)
	}
	return v, true, nil
}

func (b jsonBucket[T]) delete(tx *bbolt.Tx, id string) error {
	bk, err := b.bucket(tx)
	if err != nil {
		return err
	}
	return bk.Delete([]byte(id))
}

// all decodes every record in key order.
func (b jsonBucket[T]) all(tx *bbolt.Tx) ([]T, error) {
	bk, err := b.bucket(tx)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, bk.Stats().KeyN)
	err = bk.ForEach(func(k, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("bolt: decode %s %q: %w", b.name, k, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}
