package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/delivery"
)

// Deliveries live in one table keyed by id, with state and CreatedAt in
// columns so listing by state, newest first, is an index scan. owner and
// lease_until (migration 2) hold ClaimDelivery's claims: which process may
// finish a delivery, until when.

// PutDelivery inserts or replaces r by r.Delivery.ID.
func (s *Store) PutDelivery(ctx context.Context, r delivery.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := r.Delivery.ID
	if strings.TrimSpace(id) == "" {
		return errors.New("postgres: delivery with empty id")
	}
	if len(r.MessageIDs) == 0 {
		r.MessageIDs = nil
	}
	if len(r.Delivery.Producer.Meta) == 0 {
		r.Delivery.Producer.Meta = nil
	}
	raw, err := encode("delivery", id, r)
	if err != nil {
		return err
	}
	sec, nsec := timeKey(r.CreatedAt)
	// Idempotent: an upsert of the same record by id.
	return s.do(ctx, "put delivery", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, state, created_sec, created_nsec, data) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, created_sec = excluded.created_sec,
	created_nsec = excluded.created_nsec, data = excluded.data`, id, string(r.State), sec, nsec, raw)
		return err
	})
}

// GetDelivery returns the record for id.
func (s *Store) GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return delivery.Record{}, false, err
	}
	if id == "" {
		return delivery.Record{}, false, nil
	}
	var raw []byte
	err := s.do(ctx, "get delivery", readOnly, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT data FROM deliveries WHERE id = $1`, id).Scan(&raw)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return delivery.Record{}, false, nil
	}
	if err != nil {
		return delivery.Record{}, false, err
	}
	r, err := decode[delivery.Record]("delivery", id, raw)
	return r, err == nil, err
}

// ClaimDelivery gives owner the right to finish delivery id for lease
// (delivery.Claimer): it succeeds when the row is unowned, already owner's,
// or its lease (server time) has run out, and then renews the lease. A
// missing row is not claimed. Writes by PutDelivery keep the claim.
func (s *Store) ClaimDelivery(ctx context.Context, id, owner string, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// Idempotent by owner: a replay after a lost COMMIT finds the row
	// already owner's and renews the lease again.
	var claimed bool
	err := s.do(ctx, "claim delivery", idempotent, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `UPDATE deliveries SET owner = $2, lease_until = now() + $3::bigint * interval '1 microsecond'
WHERE id = $1 AND (owner IS NULL OR owner = $2 OR lease_until < now())`, id, owner, lease.Microseconds())
		claimed = err == nil && tag.RowsAffected() == 1
		return err
	})
	return claimed, err
}

// Deliveries returns records in state ("" for all), newest CreatedAt first
// (ties: higher ID first), at most limit (0 = no limit).
func (s *Store) Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	if state == "" {
		return queryRecords[delivery.Record](ctx, s, "delivery", `SELECT id, data FROM deliveries
ORDER BY created_sec DESC, created_nsec DESC, id DESC LIMIT $1`, lim)
	}
	return queryRecords[delivery.Record](ctx, s, "delivery", `SELECT id, data FROM deliveries WHERE state = $1
ORDER BY created_sec DESC, created_nsec DESC, id DESC LIMIT $2`, string(state), lim)
}
