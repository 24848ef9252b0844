package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
)

// Transcript tables:
//
//	transcript_sessions  session_key -> last_seq, generation (one row per session)
//	transcript_entries   (session_key, seq) -> delivery_id, JSON entry
//	transcript_messages  (session_key, message_id) -> seq (first entry wins)
//
// Append locks the session's row (upserting it) before it looks the
// delivery id up, so the dedupe check, the seq assignment and the entry and
// index writes are one serialised step per session across every process
// sharing the database. A unique index on (session_key, delivery_id) backs
// the dedupe up.

func decodeEntry(key string, seq int64, raw []byte) (transcript.Entry, error) {
	e, err := decode[transcript.Entry]("transcript entry", fmt.Sprintf("%s#%d", key, seq), raw)
	if err != nil {
		return e, err
	}
	e.Seq = uint64(seq)
	e.SessionKey = key
	if e.MessageIDs == nil {
		e.MessageIDs = []string{}
	}
	return e, nil
}

// Append stores e with the next seq of session key, or returns the existing
// entry with existed=true when e.DeliveryID is already present there.
func (s *Store) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return transcript.Entry{}, false, err
	}
	if key == "" {
		return transcript.Entry{}, false, errors.New("postgres: empty session key")
	}
	calls := e.Calls
	e = transcript.ForStore(key, e)
	var (
		out     transcript.Entry
		existed bool
	)
	// Idempotent by delivery id: a replay after a lost COMMIT finds the
	// entry and returns it (existed). An entry without a delivery id has no
	// key to find it by, so it is replayed only when surely not applied.
	eff := idempotent
	if e.DeliveryID == "" {
		eff = once
	}
	err := s.inTx(ctx, "append", eff, func(tx pgx.Tx) error {
		var err error
		out, existed, err = appendTx(ctx, tx, key, e, calls)
		return err
	})
	if err != nil {
		return transcript.Entry{}, false, err
	}
	return out, existed, nil
}

// appendTx is Append inside a transaction; e must already be normalised.
// calls (the usage records of the model calls behind e) are inserted in
// the same transaction when the entry is new.
func appendTx(ctx context.Context, tx pgx.Tx, key string, e transcript.Entry, calls []usage.Record) (transcript.Entry, bool, error) {
	// Lock (creating if needed) the session row: every appender of this
	// session, in any process, queues here until this transaction ends.
	// The entry takes the generation current under that lock (or the
	// caller's, if later: an import or a test may give one): a
	// ResetGeneration in any process is ordered before or after it.
	var last, gen int64
	err := tx.QueryRow(ctx, `INSERT INTO transcript_sessions AS s (session_key) VALUES ($1)
ON CONFLICT (session_key) DO UPDATE SET last_seq = s.last_seq
RETURNING s.last_seq, s.generation`, key).Scan(&last, &gen)
	if err != nil {
		return transcript.Entry{}, false, fmt.Errorf("postgres: lock session %q: %w", key, err)
	}
	e.Generation = max(e.Generation, int(gen))
	var deliveryID *string
	if e.DeliveryID != "" {
		deliveryID = &e.DeliveryID
		var (
			seq int64
			raw []byte
		)
		err := tx.QueryRow(ctx, `SELECT seq, data FROM transcript_entries WHERE session_key = $1 AND delivery_id = $2`,
			key, e.DeliveryID).Scan(&seq, &raw)
		switch {
		case err == nil:
			got, err := decodeEntry(key, seq, raw)
			return got, err == nil, err
		case !errors.Is(err, pgx.ErrNoRows):
			return transcript.Entry{}, false, fmt.Errorf("postgres: session %q: delivery lookup: %w", key, err)
		}
	}
	e.Seq = uint64(last + 1)
	raw, err := encode("transcript entry", key, e)
	if err != nil {
		return transcript.Entry{}, false, err
	}
	var b pgx.Batch
	b.Queue(`UPDATE transcript_sessions SET last_seq = $2 WHERE session_key = $1`, key, last+1)
	b.Queue(`INSERT INTO transcript_entries (session_key, seq, delivery_id, data) VALUES ($1, $2, $3, $4)`,
		key, last+1, deliveryID, raw)
	b.Queue(queueChangeSQL, key, last+1)
	for _, id := range e.MessageIDs {
		if id == "" {
			continue
		}
		b.Queue(`INSERT INTO transcript_messages (session_key, message_id, seq) VALUES ($1, $2, $3)
ON CONFLICT (session_key, message_id) DO NOTHING`, key, id, last+1)
	}
	if err := queueUsage(&b, calls); err != nil {
		return transcript.Entry{}, false, err
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return transcript.Entry{}, false, fmt.Errorf("postgres: session %q: append: %w", key, err)
	}
	return e, false, nil
}

// queryEntries runs a query returning (seq, data) rows of session key.
func (s *Store) queryEntries(ctx context.Context, key, sql string, args ...any) ([]transcript.Entry, error) {
	var out []transcript.Entry
	err := s.do(ctx, "read transcript", readOnly, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []transcript.Entry{}
		var (
			seq int64
			raw []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&seq, &raw}, func() error {
			e, err := decodeEntry(key, seq, raw)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Tail returns up to n of the newest entries, oldest first (an index scan
// backwards from the newest seq).
func (s *Store) Tail(ctx context.Context, key string, n int) ([]transcript.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return []transcript.Entry{}, nil
	}
	out, err := s.queryEntries(ctx, key, `SELECT seq, data FROM transcript_entries
WHERE session_key = $1 ORDER BY seq DESC LIMIT $2`, key, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// Range returns up to limit entries with Seq >= from, oldest first
// (limit <= 0: no limit).
func (s *Store) Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if from > 1<<62 {
		return []transcript.Entry{}, nil
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	return s.queryEntries(ctx, key, `SELECT seq, data FROM transcript_entries
WHERE session_key = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, key, int64(from), lim)
}

// ByMessageID finds the entry of session key holding messageID.
func (s *Store) ByMessageID(ctx context.Context, key, messageID string) (transcript.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return transcript.Entry{}, false, err
	}
	if messageID == "" {
		return transcript.Entry{}, false, nil
	}
	es, err := s.queryEntries(ctx, key, `SELECT e.seq, e.data FROM transcript_messages m
JOIN transcript_entries e ON e.session_key = m.session_key AND e.seq = m.seq
WHERE m.session_key = $1 AND m.message_id = $2`, key, messageID)
	if err != nil || len(es) == 0 {
		return transcript.Entry{}, false, err
	}
	return es[0], true, nil
}

// Generation returns the session's generation (0 if never set).
func (s *Store) Generation(ctx context.Context, key string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var gen int64
	err := s.do(ctx, "read generation", readOnly, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT generation FROM transcript_sessions WHERE session_key = $1`, key).Scan(&gen)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return int(gen), err
}

// SetGeneration records gen as the session's current generation, creating
// the session if needed.
func (s *Store) SetGeneration(ctx context.Context, key string, gen int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if key == "" {
		return errors.New("postgres: empty session key")
	}
	return s.do(ctx, "set generation", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO transcript_sessions (session_key, generation) VALUES ($1, $2)
ON CONFLICT (session_key) DO UPDATE SET generation = excluded.generation`, key, int64(gen))
		return err
	})
}

// ResetGeneration starts the session's next generation in one statement
// and returns it (transcript.Resetter). It takes the session row's lock, as
// Append does, so across processes every entry is stamped with the
// generation current when it was written: an Append after the reset
// belongs to the new generation, one before it to the old, and two resets
// count twice. Replayed only when surely not applied: a lost COMMIT fails
// with store.ErrUnavailable rather than skipping a generation.
func (s *Store) ResetGeneration(ctx context.Context, key string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if key == "" {
		return 0, errors.New("postgres: empty session key")
	}
	var gen int64
	err := s.do(ctx, "reset generation", once, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `INSERT INTO transcript_sessions AS s (session_key, generation) VALUES ($1, 1)
ON CONFLICT (session_key) DO UPDATE SET generation = s.generation + 1
RETURNING s.generation`, key).Scan(&gen)
	})
	return int(gen), err
}

// Sessions lists the session keys that have a transcript, in key order.
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var keys []string
	err := s.do(ctx, "list sessions", readOnly, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT session_key FROM transcript_sessions ORDER BY session_key`)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// LocateMessage finds a session whose transcript holds messageID (a message
// is recorded in one session; if several hold it, the first by key).
func (s *Store) LocateMessage(ctx context.Context, messageID string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	var key string
	err := s.do(ctx, "locate message", readOnly, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT session_key FROM transcript_messages WHERE message_id = $1 ORDER BY session_key LIMIT 1`,
			messageID).Scan(&key)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("postgres: locate message: %w", err)
	}
	return key, true, nil
}

// Erase rewrites entries seqs of session key with empty text and Deleted
// set, in one transaction. The old row versions stay as dead tuples until
// VACUUM reclaims them.
func (s *Store) Erase(ctx context.Context, key string, seqs []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Idempotent: an erased entry stays erased.
	return s.inTx(ctx, "erase", idempotent, func(tx pgx.Tx) error {
		for _, seq := range seqs {
			var raw []byte
			err := tx.QueryRow(ctx, `SELECT data FROM transcript_entries WHERE session_key = $1 AND seq = $2 FOR UPDATE`,
				key, int64(seq)).Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("postgres: session %q: erase %d: %w", key, seq, err)
			}
			e, err := decodeEntry(key, int64(seq), raw)
			if err != nil {
				return err
			}
			if e.Deleted && e.Text == "" {
				continue
			}
			e.Text, e.Deleted = "", true
			out, err := encode("transcript entry", key, e)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE transcript_entries SET data = $3 WHERE session_key = $1 AND seq = $2`,
				key, int64(seq), out); err != nil {
				return fmt.Errorf("postgres: session %q: erase %d: %w", key, seq, err)
			}
			if _, err := tx.Exec(ctx, queueChangeSQL, key, int64(seq)); err != nil {
				return fmt.Errorf("postgres: session %q: erase %d: %w", key, seq, err)
			}
		}
		return nil
	})
}
