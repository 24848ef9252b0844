package postgres

import (
	"context"

	"github.com/agentbot/agentbot/internal/procs"
)

var _ procs.Store = (*Store)(nil)

// RecordProcess inserts or replaces a child process group's record by key.
func (s *Store) RecordProcess(ctx context.Context, r procs.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := encode("process", r.Key(), r)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO processes (key, data) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET data = excluded.data`, r.Key(), raw)
	return err
}

// RemoveProcess forgets a record; an unknown key is not an error.
func (s *Store) RemoveProcess(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM processes WHERE key = $1`, key)
	return err
}

// Processes lists every record, ordered by key.
func (s *Store) Processes(ctx context.Context) ([]procs.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return queryRecords[procs.Record](ctx, s, "process", `SELECT key, data FROM processes ORDER BY key`)
}
