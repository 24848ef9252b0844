package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/core/notes"
)

var _ notes.Store = (*Store)(nil)

// PutNote writes n (replacing a record of the same id).
func (s *Store) PutNote(ctx context.Context, n notes.Note) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := encode("note", n.ID, n)
	if err != nil {
		return err
	}
	sec, nsec := timeKey(n.At)
	mids := n.MessageIDs
	if mids == nil {
		mids = []string{}
	}
	return s.do(ctx, "put note", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO notes (id, scope, about, conv_key, server, at_s, at_ns, message_ids, data)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (id) DO UPDATE SET scope = excluded.scope, about = excluded.about, conv_key = excluded.conv_key,
	server = excluded.server, at_s = excluded.at_s, at_ns = excluded.at_ns, message_ids = excluded.message_ids, data = excluded.data`,
			n.ID, string(n.Scope), n.About, n.Conversation.Key(), n.Server, sec, nsec, mids, raw)
		return err
	})
}

// Note returns the note of id.
func (s *Store) Note(ctx context.Context, id string) (notes.Note, bool, error) {
	ns, err := queryRecords[notes.Note](ctx, s, "note", `SELECT id, data FROM notes WHERE id = $1`, id)
	if err != nil || len(ns) == 0 {
		return notes.Note{}, false, err
	}
	return ns[0], true, nil
}

// Notes lists the notes f selects, oldest first.
func (s *Store) Notes(ctx context.Context, f notes.Filter) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.Zero() {
		return queryRecords[notes.Note](ctx, s, "note", `SELECT id, data FROM notes ORDER BY at_s, at_ns, id`)
	}
	return queryRecords[notes.Note](ctx, s, "note", `SELECT id, data FROM notes
WHERE (scope = 'me' AND $1 <> '' AND about = $1) OR (scope = 'here' AND $2 <> '' AND conv_key = $2) OR (scope = 'server' AND $3 <> '' AND server = $3)
ORDER BY at_s, at_ns, id`, f.About, f.Conversation, f.Server)
}

// DeleteNote removes the note of id.
func (s *Store) DeleteNote(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var n int64
	err := s.do(ctx, "delete note", idempotent, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM notes WHERE id = $1`, id)
		n = tag.RowsAffected()
		return err
	})
	return n > 0, err
}

// DeleteNotesByMessage removes the notes displayed by messageID.
func (s *Store) DeleteNotesByMessage(ctx context.Context, messageID string) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []notes.Note
	err := s.do(ctx, "delete notes of a message", idempotent, func(ctx context.Context) error {
		out = []notes.Note{}
		rows, err := s.pool.Query(ctx, `DELETE FROM notes WHERE message_ids @> ARRAY[$1::text] RETURNING id, data`, messageID)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			id  string
			raw []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
			n, err := decode[notes.Note]("note", id, raw)
			if err != nil {
				return err
			}
			out = append(out, n)
			return nil
		})
		return err
	})
	notes.Sort(out)
	return out, err
}
