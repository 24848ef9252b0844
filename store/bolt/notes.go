package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/notes"
)

var _ notes.Store = (*Store)(nil)

// PutNote writes n and indexes its message ids.
func (s *Store) PutNote(ctx context.Context, n notes.Note) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("note %s: %w", n.ID, err)
	}
	return s.commit.do(func(tx *bbolt.Tx) error {
		if err := unindexNote(tx, n.ID); err != nil {
			return err
		}
		for _, mid := range n.MessageIDs {
			if err := tx.Bucket(bucketNoteMsgs).Put([]byte(mid), []byte(n.ID)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketNotes).Put([]byte(n.ID), raw)
	})
}

// unindexNote removes the message index entries of note id's stored record.
func unindexNote(tx *bbolt.Tx, id string) error {
	raw := tx.Bucket(bucketNotes).Get([]byte(id))
	if raw == nil {
		return nil
	}
	var old notes.Note
	if err := json.Unmarshal(raw, &old); err != nil {
		return fmt.Errorf("note %s: %w", id, err)
	}
	idx := tx.Bucket(bucketNoteMsgs)
	for _, mid := range old.MessageIDs {
		if string(idx.Get([]byte(mid))) == id {
			if err := idx.Delete([]byte(mid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Note returns the note of id.
func (s *Store) Note(ctx context.Context, id string) (notes.Note, bool, error) {
	if err := ctx.Err(); err != nil {
		return notes.Note{}, false, err
	}
	var (
		n  notes.Note
		ok bool
	)
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketNotes).Get([]byte(id))
		if raw == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(raw, &n)
	})
	if err != nil {
		return notes.Note{}, false, fmt.Errorf("note %s: %w", id, err)
	}
	return n, ok, nil
}

// Notes lists the notes f selects, oldest first. Notes are few (each is a
// message someone asked for): a scan.
func (s *Store) Notes(ctx context.Context, f notes.Filter) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []notes.Note
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketNotes).ForEach(func(k, v []byte) error {
			var n notes.Note
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("note %s: %w", k, err)
			}
			if f.Match(n) {
				out = append(out, n)
			}
			return nil
		})
	})
	notes.Sort(out)
	return out, err
}

// DeleteNote removes the note of id.
func (s *Store) DeleteNote(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	found := false
	err := s.commit.do(func(tx *bbolt.Tx) error {
		found = tx.Bucket(bucketNotes).Get([]byte(id)) != nil
		if !found {
			return nil
		}
		if err := unindexNote(tx, id); err != nil {
			return err
		}
		return tx.Bucket(bucketNotes).Delete([]byte(id))
	})
	return found, err
}

// DeleteNotesByMessage removes the note displayed by messageID.
func (s *Store) DeleteNotesByMessage(ctx context.Context, messageID string) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []notes.Note
	err := s.commit.do(func(tx *bbolt.Tx) error {
		out = nil // a batch may run fn again
		id := tx.Bucket(bucketNoteMsgs).Get([]byte(messageID))
		if id == nil {
			return nil
		}
		id = append([]byte(nil), id...)
		raw := tx.Bucket(bucketNotes).Get(id)
		if raw == nil {
			return tx.Bucket(bucketNoteMsgs).Delete([]byte(messageID))
		}
		var n notes.Note
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("note %s: %w", id, err)
		}
		if err := unindexNote(tx, n.ID); err != nil {
			return err
		}
		out = append(out, n)
		return tx.Bucket(bucketNotes).Delete(id)
	})
	return out, err
}
