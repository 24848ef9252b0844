package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	recall "github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/transcript"
)

// Recall tables (migration "recall index"):
//
//	memory_changes  pos -> (session_key, seq): transcript changes queued by
//	                Append and Erase in their own transaction
//	memory_docs     (session_key, seq) -> the entry's displayed text, with a
//	                generated tsvector ('simple' configuration: no language
//	                stemming, the chats are in any language) under a GIN index
//	memory_state    the built mark
//
// One database holds one index, so every shard searches the same documents;
// any shard may apply queued changes (documents are derived from the
// transcripts, so applying one twice is harmless).

const queueChangeSQL = `INSERT INTO memory_changes (session_key, seq) VALUES ($1, $2)`

var (
	_ recall.Feed  = (*Store)(nil)
	_ recall.Index = RecallIndex{}
)

// Pending returns up to limit queued transcript changes, oldest first.
func (s *Store) Pending(ctx context.Context, limit int) ([]recall.Change, error) {
	var out []recall.Change
	err := s.do(ctx, "recall changes", idempotent, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT pos, session_key, seq FROM memory_changes ORDER BY pos LIMIT $1`, limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				c        recall.Change
				pos, seq int64
			)
			if err := rows.Scan(&pos, &c.Key, &seq); err != nil {
				return err
			}
			c.Pos, c.Seq = uint64(pos), uint64(seq)
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: recall changes: %w", err)
	}
	return out, nil
}

// Done removes the changes at positions from the queue.
func (s *Store) Done(ctx context.Context, positions []uint64) error {
	ps := make([]int64, len(positions))
	for i, p := range positions {
		ps[i] = int64(p)
	}
	err := s.do(ctx, "recall changes done", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM memory_changes WHERE pos = ANY($1)`, ps)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: recall changes done: %w", err)
	}
	return nil
}

// RecallIndex is the recall index in the store's database.
type RecallIndex struct{ s *Store }

// RecallIndex returns the recall index kept in the store's database.
func (s *Store) RecallIndex() RecallIndex { return RecallIndex{s} }

// Apply writes ups in one transaction.
func (x RecallIndex) Apply(ctx context.Context, ups []recall.Update) error {
	return x.s.inTx(ctx, "recall apply", idempotent, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, u := range ups {
			d := u.Doc
			if u.Delete {
				b.Queue(`DELETE FROM memory_docs WHERE session_key = $1 AND seq = $2`, d.Key, int64(d.Seq))
				continue
			}
			b.Queue(`INSERT INTO memory_docs (session_key, seq, role, author, body, at, message_id) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (session_key, seq) DO UPDATE SET role = EXCLUDED.role, author = EXCLUDED.author, body = EXCLUDED.body, at = EXCLUDED.at, message_id = EXCLUDED.message_id`,
				d.Key, int64(d.Seq), string(d.Role), d.Author, d.Text, d.At, d.MessageID)
		}
		return tx.SendBatch(ctx, &b).Close()
	})
}

// Search ranks the documents of q.Keys matching any word of q.Text
// (ts_rank: more and rarer words first), newest first among equals.
func (x RecallIndex) Search(ctx context.Context, q recall.Query) ([]recall.Hit, error) {
	var out []recall.Hit
	if len(q.Keys) == 0 || q.Limit <= 0 {
		return nil, nil
	}
	err := x.s.do(ctx, "recall search", idempotent, func(ctx context.Context) error {
		out = out[:0]
		rows, err := x.s.pool.Query(ctx, `WITH q AS (
	SELECT to_tsquery('simple', replace(plainto_tsquery('simple', $1)::text, ' & ', ' | ')) AS q
	WHERE plainto_tsquery('simple', $1)::text <> ''
)
SELECT session_key, seq, role, author, body, at, message_id, ts_rank(tsv, q.q) AS rank
FROM memory_docs, q
WHERE session_key = ANY($2) AND tsv @@ q.q
ORDER BY rank DESC, at DESC, session_key, seq
LIMIT $3`, q.Text, q.Keys, q.Limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				h    recall.Hit
				seq  int64
				role string
				rank float32
				at   time.Time
			)
			if err := rows.Scan(&h.Doc.Key, &seq, &role, &h.Doc.Author, &h.Doc.Text, &at, &h.Doc.MessageID, &rank); err != nil {
				return err
			}
			h.Doc.Seq, h.Doc.Role, h.Doc.At, h.Score = uint64(seq), transcript.Role(role), at, float64(rank)
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: recall search: %w", err)
	}
	return out, nil
}

// Built reports whether a full build completed since the last Reset.
func (x RecallIndex) Built(ctx context.Context) (bool, error) {
	var built bool
	err := x.s.do(ctx, "recall built", idempotent, func(ctx context.Context) error {
		err := x.s.pool.QueryRow(ctx, `SELECT built FROM memory_state WHERE id = 1`).Scan(&built)
		if errors.Is(err, pgx.ErrNoRows) {
			built, err = false, nil
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: recall built: %w", err)
	}
	return built, nil
}

// SetBuilt records that a full build completed.
func (x RecallIndex) SetBuilt(ctx context.Context) error {
	return x.s.inTx(ctx, "recall set built", idempotent, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO memory_state (id, built) VALUES (1, true) ON CONFLICT (id) DO UPDATE SET built = true`)
		return err
	})
}

// Reset removes every document and the built mark.
func (x RecallIndex) Reset(ctx context.Context) error {
	return x.s.inTx(ctx, "recall reset", idempotent, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM memory_state`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `TRUNCATE memory_docs`)
		return err
	})
}

// Stats counts the documents and measures the table with its indexes.
func (x RecallIndex) Stats(ctx context.Context) (recall.Stats, error) {
	var (
		st recall.Stats
		n  int64
	)
	err := x.s.do(ctx, "recall stats", idempotent, func(ctx context.Context) error {
		return x.s.pool.QueryRow(ctx, `SELECT count(*), pg_total_relation_size('memory_docs') FROM memory_docs`).Scan(&n, &st.Bytes)
	})
	if err != nil {
		return st, fmt.Errorf("postgres: recall stats: %w", err)
	}
	st.Docs = uint64(n)
	return st, nil
}
