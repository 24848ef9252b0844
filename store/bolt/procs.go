package bolt

import (
	"context"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/internal/procs"
)

var _ procs.Store = (*Store)(nil)

var processes = jsonBucket[procs.Record]{name: bucketProcesses}

// RecordProcess inserts or replaces a child process group's record by key.
func (s *Store) RecordProcess(ctx context.Context, r procs.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error { return processes.put(tx, r.Key(), r) })
}

// RemoveProcess forgets a record; an unknown key is not an error.
func (s *Store) RemoveProcess(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error { return processes.delete(tx, key) })
}

// Processes lists every record, ordered by key.
func (s *Store) Processes(ctx context.Context) ([]procs.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []procs.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = processes.all(tx)
		return err
	})
	return out, err
}
