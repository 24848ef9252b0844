package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/usage"
)

var _ usage.Store = (*Store)(nil)

// queueUsage queues the inserts of rs on b.
func queueUsage(b *pgx.Batch, rs []usage.Record) error {
	for _, r := range rs {
		raw, err := encode("usage record", r.Run, r)
		if err != nil {
			return err
		}
		sec, nsec := timeKey(r.At)
		b.Queue(`INSERT INTO usage_records (at_s, at_ns, user_id, place, data) VALUES ($1, $2, $3, $4, $5)`,
			sec, nsec, r.User, r.Place, raw)
	}
	return nil
}

// AddUsage stores rs in one transaction. The records of a turn's reply
// ride on its entry's transaction instead (transcript.Entry.Calls).
func (s *Store) AddUsage(ctx context.Context, rs ...usage.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	return s.inTx(ctx, "add usage records", once, func(tx pgx.Tx) error {
		var b pgx.Batch // afresh for each attempt
		if err := queueUsage(&b, rs); err != nil {
			return err
		}
		return tx.SendBatch(ctx, &b).Close()
	})
}

// Usage lists the records f selects, oldest first.
func (s *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sec, nsec := timeKey(f.Since)
	if f.Since.IsZero() {
		sec, nsec = -1<<62, 0
	}
	return queryRecords[usage.Record](ctx, s, "usage record", `SELECT id::text, data FROM usage_records
WHERE (at_s, at_ns) >= ($1, $2) AND ($3 = '' OR user_id = $3) AND ($4 = '' OR place = $4)
ORDER BY at_s, at_ns, id`, sec, nsec, f.User, f.Place)
}

// PruneUsage deletes records older than before.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sec, nsec := timeKey(before)
	var n int64
	err := s.do(ctx, "prune usage records", idempotent, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM usage_records WHERE (at_s, at_ns) < ($1, $2)`, sec, nsec)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
