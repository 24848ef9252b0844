package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/transcript"
)

// Tables lists the store's data tables (schema_version aside), in the order
// `bot migrate-store` reports them.
var Tables = []string{"bindings", "transcript_sessions", "transcript_entries", "transcript_messages",
	"deliveries", "session_infos", "webhooks", "jobs", "job_runs", "job_ledger", "usage_records", "processes"}

// Counts returns the number of rows of every data table.
func (s *Store) Counts(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(Tables))
	for _, t := range Tables {
		var n int64
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&n); err != nil {
			return nil, fmt.Errorf("postgres: count %s: %w", t, err)
		}
		out[t] = n
	}
	return out, nil
}

// ImportEntries appends entries that already carry their seqs (a copy from
// another store) to session key in one transaction, keeping every field as
// given. The seqs must continue the session densely (the first is the
// session's last seq + 1, each next one + 1) and delivery ids must be new
// to the session, so the transcript invariants hold after an import exactly
// as after Appends; each entry is queued for the recall index as an
// Append queues it.
func (s *Store) ImportEntries(ctx context.Context, key string, entries []transcript.Entry) error {
	if key == "" {
		return errors.New("postgres: empty session key")
	}
	if len(entries) == 0 {
		return nil
	}
	// Once: a replay after a lost COMMIT would fail the dense-seq check.
	return s.inTx(ctx, "import entries", once, func(tx pgx.Tx) error {
		var last int64
		err := tx.QueryRow(ctx, `INSERT INTO transcript_sessions AS s (session_key) VALUES ($1)
ON CONFLICT (session_key) DO UPDATE SET last_seq = s.last_seq
RETURNING s.last_seq`, key).Scan(&last)
		if err != nil {
			return fmt.Errorf("postgres: lock session %q: %w", key, err)
		}
		var b pgx.Batch
		for i, e := range entries {
			if want := uint64(last) + uint64(i) + 1; e.Seq != want {
				return fmt.Errorf("postgres: import %q: entry %d has seq %d, want %d (seqs must be dense)", key, i, e.Seq, want)
			}
			e.SessionKey = key
			e.MessageIDs = slices.Clone(e.MessageIDs)
			if e.MessageIDs == nil {
				e.MessageIDs = []string{}
			}
			e.Meta = maps.Clone(e.Meta)
			if len(e.Meta) == 0 {
				e.Meta = nil
			}
			raw, err := encode("transcript entry", key, e)
			if err != nil {
				return err
			}
			var deliveryID *string
			if e.DeliveryID != "" {
				deliveryID = &e.DeliveryID
			}
			b.Queue(`INSERT INTO transcript_entries (session_key, seq, delivery_id, data) VALUES ($1, $2, $3, $4)`,
				key, int64(e.Seq), deliveryID, raw)
			b.Queue(queueChangeSQL, key, int64(e.Seq)) // the recall index takes the imported history in
			for _, id := range e.MessageIDs {
				if id != "" {
					b.Queue(`INSERT INTO transcript_messages (session_key, message_id, seq) VALUES ($1, $2, $3)
ON CONFLICT (session_key, message_id) DO NOTHING`, key, id, int64(e.Seq))
				}
			}
		}
		b.Queue(`UPDATE transcript_sessions SET last_seq = $2 WHERE session_key = $1`, key, last+int64(len(entries)))
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("postgres: import %q: %w", key, err)
		}
		return nil
	})
}
