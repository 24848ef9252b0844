package bolt

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

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

// all decodes every record in key order. Values are decoded straight from
// the memory map while the transaction is open; large buckets are decoded
// on all CPUs (JSON decoding dominates loading, e.g. 100k bindings at start).
func (b jsonBucket[T]) all(tx *bbolt.Tx) ([]T, error) {
	bk, err := b.bucket(tx)
	if err != nil {
		return nil, err
	}
	var keys, raws [][]byte
	if err := bk.ForEach(func(k, raw []byte) error {
		if raw != nil { // skip nested buckets
			keys, raws = append(keys, k), append(raws, raw)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]T, len(raws))
	workers := min(runtime.GOMAXPROCS(0), len(raws)/parallelDecodeMin+1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(raws); i += workers {
				if err := json.Unmarshal(raws[i], &out[i]); err != nil {
					errs[w] = fmt.Errorf("bolt: decode %s %q: %w", b.name, keys[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parallelDecodeMin is the number of records per extra decoding goroutine.
const parallelDecodeMin = 1000
