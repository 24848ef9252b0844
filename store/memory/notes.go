package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/agentbot/agentbot/core/notes"
)

var _ notes.Store = (*Notes)(nil)

// Notes is an in-memory note store (tests).
type Notes struct {
	mu sync.Mutex
	m  map[string]notes.Note
}

// NewNotes returns an empty store.
func NewNotes() *Notes { return &Notes{m: map[string]notes.Note{}} }

// PutNote stores n.
func (s *Notes) PutNote(ctx context.Context, n notes.Note) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.MessageIDs = slices.Clone(n.MessageIDs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[n.ID] = n
	return nil
}

// Note returns the note of id.
func (s *Notes) Note(ctx context.Context, id string) (notes.Note, bool, error) {
	if err := ctx.Err(); err != nil {
		return notes.Note{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.m[id]
	n.MessageIDs = slices.Clone(n.MessageIDs)
	return n, ok, nil
}

// Notes lists the notes f selects, oldest first.
func (s *Notes) Notes(ctx context.Context, f notes.Filter) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []notes.Note
	for _, n := range s.m {
		if f.Match(n) {
			n.MessageIDs = slices.Clone(n.MessageIDs)
			out = append(out, n)
		}
	}
	s.mu.Unlock()
	notes.Sort(out)
	return out, nil
}

// DeleteNote removes the note of id.
func (s *Notes) DeleteNote(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	delete(s.m, id)
	return ok, nil
}

// DeleteNotesByMessage removes the notes displayed by messageID.
func (s *Notes) DeleteNotesByMessage(ctx context.Context, messageID string) ([]notes.Note, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []notes.Note
	for id, n := range s.m {
		if slices.Contains(n.MessageIDs, messageID) {
			out = append(out, n)
			delete(s.m, id)
		}
	}
	s.mu.Unlock()
	notes.Sort(out)
	return out, nil
}
