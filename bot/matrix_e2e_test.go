package bot

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/rs/zerolog"
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
func (w *mxWorld) botReplies(t *testing.T, room, conv string) []rule1.Shown {
	t.Helper()
	var out []rule1.Shown
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
	chat := func() rule1.Display { return rule1.Multi{rule1.Emulator(h.emu), w.display(t, rooms...)} }
	finishBotOn(t, h, chat, append(append([]string{h.general.ID}, rooms...), convs...)...)
}

// TestMatrixE2EMentionReply: one process on both platforms. On Matrix, a
// message that mentions the bot is answered in its room; one that does not
// is not; the Discord side answers as ever. Rule 1 holds on both: the
// room's transcript is exactly what the room displays (and so is
// #general's).
func TestMatrixE2EMentionReply(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
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

// threadsOf returns the thread roots of room that have messages.
func (d mxDisplay) threadsOf(room string) []string {
	var out []string
	for _, m := range d.Messages(room) {
		if len(d.Messages(m.ID)) > 0 {
			out = append(out, m.ID)
		}
	}
	return out
}

// TestMatrixE2ESpawnIntoThread: `!spawn ... thread=true` makes a thread
// in the room; the subagent's intro and completion are displayed in the
// thread only, under its persona (an appservice ghost), never in the room;
// the command is answered in the room. Rule 1 holds for the room and the
// thread (the root is a bot message of the room's transcript).
func TestMatrixE2ESpawnIntoThread(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w)
	w.say(t, w.room, "", "!spawn summarize the logs thread=true label=logs", false)
	var root string
	waitFor(t, "the subagent's thread with its completion", func() bool {
		d := w.display(t, w.room)
		for _, r := range d.threadsOf(w.room) {
			for _, m := range d.Messages(r) {
				if m.FromBot && strings.Contains(m.Content, "summarize the logs") && !strings.Contains(m.Content, "session active") {
					root = r
					return true
				}
			}
		}
		return false
	})
	d := w.display(t, w.room)
	for _, m := range d.Messages(w.room) {
		if m.FromBot && strings.Contains(m.Content, "finished") {
			t.Errorf("the room displays the subagent's output %q: its completion belongs in the thread", m.Content)
		}
	}
	ghost := false
	for _, e := range mustTimeline(t, w, w.room) {
		if strings.HasPrefix(e.Sender, "@"+w.as.UserPrefix) {
			ghost = true
		}
	}
	if !ghost {
		t.Error("no message under an appservice ghost (the subagent's persona)")
	}
	finishMatrixBot(t, h, w, []string{w.room}, root)
}

func mustTimeline(t *testing.T, w *mxWorld, room string) []mxEvent {
	t.Helper()
	es, _, err := w.timeline(t.Context(), room)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// spawnThread runs `!spawn <task> thread=true` as alice and returns the
// new thread's root once its intro is displayed.
func (w *mxWorld) spawnThread(t *testing.T, task, label string) string {
	t.Helper()
	w.say(t, w.room, "", "!spawn "+task+" thread=true label="+label, false)
	var root string
	waitFor(t, "the "+label+" thread with its intro", func() bool {
		d := w.display(t, w.room)
		for _, r := range d.threadsOf(w.room) {
			for _, m := range d.Messages(r) {
				if m.FromBot && strings.Contains(m.Content, "session active") && strings.Contains(m.Content, task) {
					root = r
					return true
				}
			}
		}
		return false
	})
	return root
}

// TestMatrixE2ERedactedThreadRootFailsClosed: a moderator redacts a bound
// thread's root; its binding ends (thread-delete); the completion that
// follows is posted nowhere (not in the gone thread, not in the room),
// the room gets a notice without the result, and the result is kept
// (invariant 6), as on Discord when a thread is deleted.
func TestMatrixE2ERedactedThreadRootFailsClosed(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	g := newAdGatedModel(t)
	h := startMatrixBot(t, w, g.configure)
	ended := adWatchEnded(h)
	root := w.spawnThread(t, "[hold] secret-result", "gone")
	threadBefore := len(w.display(t, w.room).Messages(root))
	w.do(t, w.alice.AccessToken, "PUT", "/rooms/"+url.PathEscape(w.room)+"/redact/"+url.PathEscape(root)+"/r1", map[string]any{"reason": "off topic"}, nil)
	recs := ended.wait(t, 1)
	if recs[0].EndedReason != binding.ReasonThreadDelete || recs[0].Conversation.ConversationID != root {
		t.Fatalf("ended %+v, want the thread's binding with reason %s", recs[0], binding.ReasonThreadDelete)
	}
	g.release()
	waitFor(t, "the notice in the room", func() bool {
		for _, m := range w.display(t, w.room).Messages(w.room) {
			if m.FromBot && strings.Contains(m.Content, "was not posted") {
				return true
			}
		}
		return false
	})
	info, _ := h.app.sessions.Info(recs[0].TargetSessionKey)
	if info.Status != session.StatusUndeliver || !strings.Contains(info.Result, "secret-result") {
		t.Fatalf("subagent info %s %q: the result must be kept", info.Status, info.Result)
	}
	d := w.display(t, w.room)
	if n := len(d.Messages(root)); n != threadBefore {
		t.Errorf("the gone thread got %d new messages", n-threadBefore)
	}
	for _, m := range d.Messages(w.room) {
		if strings.Contains(m.Content, "secret-result") && m.FromBot && !strings.Contains(m.Content, "Started subagent") {
			t.Errorf("the room shows the result: %q", m.Content)
		}
	}
	finishMatrixBot(t, h, w, []string{w.room}, root)
}

// command runs a text command as alice in room and returns the bot's
// reply to it (the first bot message after the command that contains want).
func (w *mxWorld) command(t *testing.T, room, text, want string) string {
	t.Helper()
	id := w.say(t, room, "", text, false)
	var reply string
	waitFor(t, "the reply to "+text, func() bool {
		after := false
		for _, m := range w.display(t, room).Messages(room) {
			if m.ID == id {
				after = true
			} else if after && m.FromBot && strings.Contains(m.Content, want) {
				reply = m.Content
				return true
			}
		}
		return false
	})
	return reply
}

// jobID is the id in a "⏰ Job `<id>` added" reply.
func jobID(t *testing.T, reply string) string {
	t.Helper()
	_, rest, ok := strings.Cut(reply, "`")
	id, _, ok2 := strings.Cut(rest, "`")
	if !ok || !ok2 || id == "" {
		t.Fatalf("no job id in %q", reply)
	}
	return id
}

// TestMatrixE2EJobs: on Matrix, `!cron add` makes a background job and an
// in-chat one; `!cron run` runs each: the background run posts only its
// result in the room, the in-chat run posts its trigger and the agent's
// reply there. Rule 1 holds on both platforms (the runs' entries included).
func TestMatrixE2EJobs(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w)
	bg := jobID(t, w.command(t, w.room, `!cron add compile the digest schedule="every 1h" target=isolated`, "added (background)"))
	w.command(t, w.room, "!cron run "+bg, "ran: ok")
	results := 0
	for _, m := range w.display(t, w.room).Messages(w.room) {
		if m.FromBot && m.Content == "echo: compile the digest" {
			results++
		}
	}
	if results != 1 {
		t.Errorf("the background result is displayed %d times, want once", results)
	}
	chat := jobID(t, w.command(t, w.room, `!cron add check the queue schedule="every 1h" target=main`, "added (in-chat)"))
	w.command(t, w.room, "!cron run "+chat, "ran: ok")
	waitFor(t, "the in-chat run's reply", func() bool {
		for _, m := range w.display(t, w.room).Messages(w.room) {
			if m.FromBot && strings.HasPrefix(m.Content, "echo: ") && strings.Contains(m.Content, "check the queue") {
				return true
			}
		}
		return false
	})
	list := w.command(t, w.room, "!cron list", bg)
	if !strings.Contains(list, chat) {
		t.Errorf("!cron list = %q, want both jobs", list)
	}
	finishMatrixBot(t, h, w, []string{w.room})
}

// TestMatrixE2ERestartMidBurstNoDuplicate: alice asks five questions in a
// row; the bot is stopped while it answers them and started again on the
// same store and /sync token: every question is answered exactly once (the
// batch handed again after the restart starts no second turn, none is
// lost), and Rule 1 holds.
func TestMatrixE2ERestartMidBurstNoDuplicate(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	dir := t.TempDir()
	token := filepath.Join(dir, "matrix-sync.token")
	run := func() *harness { return runMatrixBotIn(t, w, dir, token) }
	first := run()
	waitFor(t, "the first /sync", func() bool { _, err := os.Stat(token); return err == nil })
	const n = 5
	for i := range n {
		w.say(t, w.room, "", fmt.Sprintf("bot: question %d", i), true)
	}
	waitFor(t, "a first answer", func() bool { return len(w.botReplies(t, w.room, w.room)) >= 1 })
	if err := first.close(); err != nil {
		t.Fatalf("stop mid-burst: %v", err)
	}
	second := run()
	waitFor(t, "every answer", func() bool { return len(w.botReplies(t, w.room, w.room)) >= n })
	for i := range n {
		q, answers := fmt.Sprintf("question %d", i), 0
		for _, m := range w.botReplies(t, w.room, w.room) {
			if strings.HasSuffix(m.Content, q) {
				answers++
			}
		}
		if answers != 1 {
			t.Errorf("%q is answered %d times, want once", q, answers)
		}
	}
	finishMatrixBot(t, second, w, []string{w.room})
}

// TestMatrixE2EMatrixOnly: without a Discord token, the matrix section on,
// the bot runs on Matrix alone: `bot run`'s config is valid, no Discord
// gateway is started and Discord is never called, and the bot answers on
// Matrix with Rule 1 holding.
func TestMatrixE2EMatrixOnly(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w, func(c *config.Config) { c.Discord.Token = "" })
	if h.app.gateway != nil || h.app.discord != nil {
		t.Fatal("a Discord client or gateway without a Discord token")
	}
	w.say(t, w.room, "", "bot: are you there?", true)
	waitFor(t, "the answer", func() bool { return len(w.botReplies(t, w.room, w.room)) == 1 })
	if n := len(h.emu.Requests()); n != 0 {
		t.Errorf("a Matrix-only bot made %d Discord requests", n)
	}
	finishMatrixBot(t, h, w, []string{w.room})
}

// runMatrixBotIn starts the bot on the world's homeserver over the store in
// dir and the /sync token file token (the same ones at every call: a
// restart), closed when the test ends.
func runMatrixBotIn(t *testing.T, w *mxWorld, dir, token string) *harness {
	t.Helper()
	h, err := newHarness(harnessOptions{Dir: dir, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Configure: func(c *config.Config) {
		w.configure(c)
		c.Matrix.SyncTokenFile = token
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}
