package bot

// End-to-end tests of `bot audit` (issue 32 item 3): what a channel
// displays now, read from the platform, against the transcripts.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/internal/rule1"
)

// runAudit runs `bot audit target` (Audit) over cfg's store and
// platforms and returns the differences' count, the output and the error.
func runAudit(t *testing.T, cfg *config.Config, target string, asJSON bool) (int, string, error) {
	t.Helper()
	st, err := OpenStore(t.Context(), cfg.Store, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	n, err := Audit(t.Context(), cfg, st, target, &out, asJSON)
	return n, out.String(), err
}

// TestAuditE2EDiscord: `bot audit` (Audit; exit 0 when it finds nothing,
// 1 otherwise) finds nothing on an intact channel; after a user's message
// is edited with the gateway event withheld, a bot reply is deleted and a
// message addressed to the bot is posted while the bot is down, it writes
// one line per difference naming the message. The
// running bot's audit (the console's and the periodic one) finds the
// withheld edit too.
func TestAuditE2EDiscord(t *testing.T) {
	t.Parallel()
	h := startBot(t, &edModel{}, nil)
	first := edAsk(t, h, "first question", 2)
	edAsk(t, h, "second question", 4)
	// The reply is displayed before its entry is written: wait for it.
	last := h.emu.Messages(h.general.ID)[3].ID
	eventually(t, "the reply's entry", func() bool {
		_, _, ok, err := h.app.transcripts.Locate(t.Context(), last)
		return ok && err == nil
	})
	// An edit the bot never hears of: the running bot's audit sees it.
	if _, err := h.emu.UserEditWithheld(first.ID, "<@"+h.emu.BotUserID()+"> first question, edited"); err != nil {
		t.Fatal(err)
	}
	r, err := h.app.auditor.Conversation(t.Context(), h.general.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Differences(); len(d) != 1 || d[0].MessageID != first.ID || d[0].Diff != audit.Text {
		t.Fatalf("running bot's audit: %+v, want one text difference at %s", d, first.ID)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// Put the edit back: the channel is intact again.
	if _, err := h.emu.UserEditWithheld(first.ID, "<@"+h.emu.BotUserID()+"> first question"); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{h.general.ID, "all"} {
		if n, out, err := runAudit(t, h.cfg, target, false); n != 0 || err != nil || !strings.Contains(out, "1 conversation(s) audited") {
			t.Fatalf("bot audit %s on an intact channel: %d differences, %v\n%s", target, n, err, out)
		}
	}

	// Behind the bot's back (it is down: no gateway event reaches it).
	if _, err := h.emu.UserEditWithheld(first.ID, "<@"+h.emu.BotUserID()+"> first question, edited"); err != nil {
		t.Fatal(err)
	}
	msgs := h.emu.Messages(h.general.ID)
	reply := msgs[len(msgs)-1]
	if err := h.emu.DeleteMessage(reply.ID); err != nil {
		t.Fatal(err)
	}
	unseen, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> are you there?")
	if err != nil {
		t.Fatal(err)
	}
	n, out, err := runAudit(t, h.cfg, h.general.ID, true)
	if n != 3 || err != nil {
		t.Fatalf("bot audit after changes: %d differences, %v, want 3\n%s", n, err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var j auditJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, j.MessageID+" "+j.Kind)
	}
	slices.Sort(got)
	want := []string{first.ID + " text", reply.ID + " extra", unseen.ID + " missing"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("differences %v, want %v\n%s", got, want, out)
	}
	n, out, _ = runAudit(t, h.cfg, h.general.ID, false)
	for _, w := range []string{
		h.general.ID + " message " + first.ID + ": text: the chat displays other text than the transcript holds",
		`display:    "<@` + h.emu.BotUserID() + `> first question, edited"`,
		h.general.ID + " message " + reply.ID + ": extra:",
		h.general.ID + " message " + unseen.ID + ": missing:",
	} {
		if n != 3 || !strings.Contains(out, w) {
			t.Errorf("bot audit: %d differences, output lacks %q:\n%s", n, w, out)
		}
	}
	if _, _, err := runAudit(t, h.cfg, "12345", false); !errors.Is(err, audit.ErrUnknownConversation) {
		t.Errorf("bot audit of an unknown channel: %v, want ErrUnknownConversation", err)
	}
	// The tests' Rule 1 postcondition judges with the same comparison.
	st, err := OpenStore(t.Context(), h.cfg.Store, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	problems, err := rule1.Check(t.Context(), rule1.Emulator(h.emu), st, []string{h.general.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"message " + first.ID + ": text:", "message " + reply.ID + ": extra:", "message " + unseen.ID + ": missing:"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("rule 1 problems lack %q: %q", w, problems)
		}
	}
}

// TestAuditE2EMatrix: against a real Dendrite, `bot audit ROOM` finds
// nothing while the room displays what the transcript holds, and one text
// difference naming the message after alice edits it (m.replace) while
// the bot is down, so the bot never syncs the edit.
func TestAuditE2EMatrix(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w)
	asked := w.say(t, w.room, "", "bot: what is the plan?", true)
	waitFor(t, "the bot's answer in the room", func() bool { return len(w.botReplies(t, w.room, w.room)) == 1 })
	reply := w.botReplies(t, w.room, w.room)[0]
	eventually(t, "the reply's entry", func() bool {
		_, _, ok, err := h.app.transcripts.Locate(t.Context(), reply.ID)
		return ok && err == nil
	})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n, out, err := runAudit(t, h.cfg, w.room, false); n != 0 || err != nil {
		t.Fatalf("bot audit %s on an intact room: %d differences, %v\n%s", w.room, n, err, out)
	}
	// alice edits her message; the bot is down and never syncs it.
	edit := map[string]any{"msgtype": "m.text", "body": "* bot: what is the plan now?",
		"m.new_content": map[string]any{"msgtype": "m.text", "body": "bot: what is the plan now?"},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": asked}}
	w.do(t, w.alice.AccessToken, "PUT", fmt.Sprintf("/rooms/%s/send/m.room.message/t%d", url.PathEscape(w.room), w.txn.Add(1)), edit, nil)
	// Dendrite serves /messages a moment after a send: wait for the edit.
	var n int
	var out string
	var err error
	waitFor(t, "the edit in the room's history", func() bool {
		n, out, err = runAudit(t, h.cfg, w.room, false)
		return n > 0 || err != nil
	})
	if n != 1 || err != nil || !strings.Contains(out, w.room+" message "+asked+": text:") || !strings.Contains(out, `display:    "bot: what is the plan now?"`) {
		t.Fatalf("bot audit after a withheld edit: %d differences, %v, want one text difference at %s\n%s", n, err, asked, out)
	}
}
