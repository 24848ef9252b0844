package bot

import (
	"context"
	"sync/atomic"

	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
)

// notesSide is memory's notes: the remember and forget tools, the notes
// each turn is given, /memory list and forget, and the forgetting of a
// note whose message was deleted. memory.enabled and memory.notes turn it
// on and off (SIGHUP included: no index is needed).
type notesSide struct {
	on  atomic.Bool
	svc *notes.Service
	st  notes.Store
}

func newNotesSide(a *App) *notesSide {
	n := &notesSide{st: a.store}
	n.on.Store(a.cfg.Memory.NotesOn())
	n.svc = notes.New(notes.Options{}, notes.Deps{
		Store: a.store, Poster: a.outbound, Deleter: a.platforms, Changes: a.transcripts, Authority: a.auth, Places: a.places(),
		On: n.on.Load, Clock: a.clock, Log: a.log.With().Str("component", "notes").Logger(),
	})
	return n
}

// toolbox puts remember and forget in front of next (offered while notes
// are on).
func (n *notesSide) toolbox(next session.Toolbox) session.Toolbox {
	return notes.Tools{Notes: n.svc, Next: next}
}

func (n *notesSide) commands() command.Notes { return n.svc }

// eraseNotes forgets the notes of a deleted message (a transcript.Eraser;
// it runs whether notes are on or off: a deleted message is no note).
func (a *App) eraseNotes(ctx context.Context, e transcript.Entry) error {
	if a.notes == nil {
		return nil
	}
	return a.notes.svc.EraseEntry(ctx, e)
}

// SetNotes applies reloaded memory settings (SIGHUP): notes are on only
// with memory.enabled and memory.notes; off withdraws remember and forget
// and stops giving notes to the turns that start after it.
func (a *App) SetNotes(on bool) { a.notes.on.Store(on) }

// Notes lists every note (tests).
func (a *App) Notes(ctx context.Context) ([]notes.Note, error) { return a.notes.AllNotes(ctx) }

// AllNotes lists every note, oldest first (the console's Memory page).
func (n *notesSide) AllNotes(ctx context.Context) ([]notes.Note, error) {
	return n.st.Notes(ctx, notes.Filter{})
}
