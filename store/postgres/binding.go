package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/binding"
)

// BindingsChannel is the NOTIFY channel PutBindings signals on, one notice
// per written record with its id as payload, sent in the writing
// transaction (so a listener sees the notice only once the write is
// visible). See Listener.
const BindingsChannel = "agentbot_bindings"

// PutBindings inserts or replaces the records in one transaction and
// notifies BindingsChannel with each id; a record with an empty ID fails
// the whole call.
func (s *Store) PutBindings(ctx context.Context, recs ...binding.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var b pgx.Batch
	for _, r := range recs {
		if strings.TrimSpace(r.ID) == "" {
			return errors.New("postgres: binding with empty id")
		}
		if len(r.Metadata) == 0 {
			r.Metadata = nil
		}
		raw, err := encode("binding", r.ID, r)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO bindings (id, data) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET data = excluded.data`, r.ID, raw)
		b.Queue(`SELECT pg_notify($1, $2)`, BindingsChannel, r.ID)
	}
	if len(recs) == 0 {
		return nil
	}
	// Idempotent: upserts by id (a replay notifies again; listeners re-read).
	return s.inTx(ctx, "put bindings", idempotent, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
}

// Bindings returns every stored record, ordered by ID.
func (s *Store) Bindings(ctx context.Context) ([]binding.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return queryRecords[binding.Record](ctx, s, "binding", `SELECT id, data FROM bindings ORDER BY id`)
}

// BindingsByID returns the stored records among ids, ordered by ID
// (binding.ByIDStore: what Service.Refresh reads on a change notice).
func (s *Store) BindingsByID(ctx context.Context, ids ...string) ([]binding.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return []binding.Record{}, nil
	}
	return queryRecords[binding.Record](ctx, s, "binding", `SELECT id, data FROM bindings WHERE id = ANY($1) ORDER BY id`, ids)
}

// queryRecords runs a query returning (id, data) rows and decodes each data.
func queryRecords[T any](ctx context.Context, s *Store, what, sql string, args ...any) ([]T, error) {
	var out []T
	err := s.do(ctx, "read "+what+"s", readOnly, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			id  string
			raw []byte
		)
		out = []T{}
		_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
			v, err := decode[T](what, id, raw)
			if err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
		return err
	})
	return out, err
}
