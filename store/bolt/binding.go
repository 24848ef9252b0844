package bolt

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/binding"
)

var bindings = jsonBucket[binding.Record]{name: bucketBindings}

// PutBindings inserts or replaces the records in one transaction; a record
// with an empty ID fails the whole call.
func (s *Store) PutBindings(ctx context.Context, recs ...binding.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, r := range recs {
		if strings.TrimSpace(r.ID) == "" {
			return errors.New("bolt: binding with empty id")
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		for _, r := range recs {
			if len(r.Metadata) == 0 {
				r.Metadata = nil
			}
			if err := bindings.put(tx, r.ID, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Bindings returns every stored record, ordered by ID.
func (s *Store) Bindings(ctx context.Context) ([]binding.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []binding.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = bindings.all(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
