package memory_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/notes/notestest"
	"github.com/agentbot/agentbot/store/memory"
)

func TestNoteStore(t *testing.T) {
	notestest.Run(t, func(*testing.T) notes.Store { return memory.NewNotes() })
}
