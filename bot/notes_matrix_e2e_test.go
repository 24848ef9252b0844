package bot

import (
	"strings"
	"testing"

	"github.com/agentbot/agentbot/config"
)

// TestNotesE2EOnMatrix: on a real homeserver, remember posts the note in
// the room, forget redacts it and the record goes; Rule 1 holds.
func TestNotesE2EOnMatrix(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w, func(c *config.Config) { c.Memory.Enabled = true })
	noted := func() string {
		for _, m := range w.botReplies(t, w.room, w.room) {
			if strings.HasPrefix(m.Content, "📝 Noted (here): matrix plum") {
				return m.Content
			}
		}
		return ""
	}
	w.say(t, w.room, "", "bot:\n"+`!tool remember {"text": "matrix plum", "scope": "here"}`, true)
	waitFor(t, "the note in the room", func() bool { return noted() != "" })
	_, nid, ok := strings.Cut(noted(), " · note ")
	if !ok || len(nid) != 8 {
		t.Fatalf("no note id in %q", noted())
	}
	id := []string{"", nid}
	waitFor(t, "the turn's answer", func() bool { return len(w.botReplies(t, w.room, w.room)) >= 2 })
	w.say(t, w.room, "", "bot:\n"+`!tool forget {"id": "`+id[1]+`"}`, true)
	waitFor(t, "the note's redaction", func() bool { return noted() == "" })
	waitFor(t, "the record to go", func() bool {
		_, ok, err := h.app.store.Note(t.Context(), id[1])
		return err == nil && !ok
	})
	waitFor(t, "forget's answer", func() bool {
		rs := w.botReplies(t, w.room, w.room)
		return len(rs) >= 2 && strings.Contains(rs[len(rs)-1].Content, "forgot note "+id[1])
	})
	finishMatrixBot(t, h, w, []string{w.room})
}
