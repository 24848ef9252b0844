package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
)

// startMatrixBot runs the real bot on Discord (the emulator) and on the
// world's homeserver in one process, and waits until its first /sync is
// done (a first start skips the room history: a message is answered only
// if it comes after).
func startMatrixBot(t *testing.T, w *mxWorld, configure ...func(*config.Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "matrix-sync.token")
	h := startBot(t, nil, func(c *config.Config) {
		w.configure(c)
		c.Matrix.SyncTokenFile = token
		for _, f := range configure {
			f(c)
		}
	})
	waitFor(t, "the first /sync", func() bool { _, err := os.Stat(token); return err == nil })
	return h
}

// waitFor polls cond (the homeserver has no change feed for the test to
// wait on) until it holds, for at most 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// botReplies returns the bot's messages in conv (a room or a thread root).
func (w *mxWorld) botReplies(t *testing.T, room, conv string) []shownMessage {
	t.Helper()
	var out []shownMessage
	for _, m := range w.display(t, room).Messages(conv) {
		if m.FromBot {
			out = append(out, m)
		}
	}
	return out
}

// finishMatrixBot stops the bot and holds Rule 1 on both platforms at
// once: Discord's #general and the homeserver's rooms and thread roots
// (convs) against every transcript.
func finishMatrixBot(t *testing.T, h *harness, w *mxWorld, rooms []string, convs ...string) {
	t.Helper()
	chat := func() chatDisplay { return multiDisplay{emulatorDisplay{h.emu}, w.display(t, rooms...)} }
	finishBotOn(t, h, chat, append(append([]string{h.general.ID}, rooms...), convs...)...)
}

// TestMatrixE2EMentionReply: one process on both platforms. On Matrix, a
// message that mentions the bot is answered in its room; one that does not
// is not; the Discord side answers as ever. Rule 1 holds on both: the
// room's transcript is exactly what the room displays (and so is
// #general's).
func TestMatrixE2EMentionReply(t *testing.T) {
	t.Parallel()
	w := newMxWorld(t)
	h := startMatrixBot(t, w)
	w.say(t, w.room, "", "just chatting, no bot here", false)
	asked := w.say(t, w.room, "", "bot: what is the plan?", true)
	waitFor(t, "the bot's answer in the room", func() bool { return len(w.botReplies(t, w.room, w.room)) == 1 })
	adSay(t, h, h.general.ID, adMention(h)+"and on Discord?")
	waitUntil(t, h, "the Discord answer", func() bool { return len(botMsgs(h, h.general.ID)) == 1 })
	reply := w.botReplies(t, w.room, w.room)[0]
	if !strings.Contains(reply.Content, "what is the plan?") {
		t.Errorf("the answer %q does not answer %q", reply.Content, asked)
	}
	finishMatrixBot(t, h, w, []string{w.room})
}
