package bolt

import (
	"testing"

	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/notes/notestest"
)

func TestNoteStore(t *testing.T) {
	notestest.Run(t,
		func(t *testing.T) notes.Store { return openTemp(t) },
		notestest.WithReopen(func(t *testing.T, s notes.Store) notes.Store { return reopen(t, s.(*Store)) }))
}
