package main

// End-to-end tests of `bot audit` (issue 32 item 3): what a channel
// displays now, read from the platform, against the transcripts.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/audit"
)

// writeAuditConfig writes a config that reaches h's emulator and store.
func writeAuditConfig(t *testing.T, h *harness) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	body := fmt.Sprintf("discord:\n  token: %q\n  apiURL: %q\nstore:\n  path: %q\nhttp:\n  listen: \"\"\n", h.cfg.Discord.Token, h.cfg.Discord.APIURL, h.cfg.Store.Path)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAudit runs `bot audit args... -config cfg` and returns its exit code,
// stdout and stderr.
func runAudit(t *testing.T, cfg string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append(append([]string{"audit"}, args...), "-config", cfg), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestAuditE2EDiscord: `bot audit` exits 0 on an intact channel; after a
// user's message is edited with the gateway event withheld, a bot reply
// is deleted and a message addressed to the bot is posted while the bot is
// down, it exits 1 with one line per difference naming the message. The
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
	cfg := writeAuditConfig(t, h)
	// Put the edit back: the channel is intact again.
	if _, err := h.emu.UserEditWithheld(first.ID, "<@"+h.emu.BotUserID()+"> first question"); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{h.general.ID, "all"} {
		if code, out, errOut := runAudit(t, cfg, target); code != 0 || !strings.Contains(out, "1 conversation(s) audited") {
			t.Fatalf("bot audit %s on an intact channel: exit %d\n%s%s", target, code, out, errOut)
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
	code, out, errOut := runAudit(t, cfg, h.general.ID, "-json")
	if code != 1 {
		t.Fatalf("bot audit after changes: exit %d, want 1\n%s%s", code, out, errOut)
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
	code, out, _ = runAudit(t, cfg, h.general.ID)
	for _, w := range []string{
		h.general.ID + " message " + first.ID + ": text: the chat displays other text than the transcript holds",
		`display:    "<@` + h.emu.BotUserID() + `> first question, edited"`,
		h.general.ID + " message " + reply.ID + ": extra:",
		h.general.ID + " message " + unseen.ID + ": missing:",
	} {
		if code != 1 || !strings.Contains(out, w) {
			t.Errorf("bot audit: exit %d, output lacks %q:\n%s", code, w, out)
		}
	}
	if code, _, errOut := runAudit(t, cfg, "12345"); code != 1 || !strings.Contains(errOut, "no transcript holds a message") {
		t.Errorf("bot audit of an unknown channel: exit %d, stderr %q", code, errOut)
	}
}

// TestAuditE2EMatrix: against a real Dendrite, `bot audit ROOM` exits 0
// while the room displays what the transcript holds, and 1 naming the
// message after alice edits it (m.replace) while the bot is down, so the
// bot never syncs the edit.
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
	cfg := writeAuditConfig(t, h)
	body := fmt.Sprintf("matrix:\n  homeserver: %q\n  userId: %q\n  accessToken: %q\n  appservice: {asToken: %q, userPrefix: %q, senderLocalpart: %q}\n",
		w.srv.URL, w.bot.UserID, w.bot.AccessToken, w.as.ASToken, w.as.UserPrefix, w.as.SenderLocalpart)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if code, out, errOut := runAudit(t, cfg, w.room); code != 0 {
		t.Fatalf("bot audit %s on an intact room: exit %d\n%s%s", w.room, code, out, errOut)
	}
	// alice edits her message; the bot is down and never syncs it.
	edit := map[string]any{"msgtype": "m.text", "body": "* bot: what is the plan now?",
		"m.new_content": map[string]any{"msgtype": "m.text", "body": "bot: what is the plan now?"},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": asked}}
	w.do(t, w.alice.AccessToken, "PUT", fmt.Sprintf("/rooms/%s/send/m.room.message/t%d", url.PathEscape(w.room), w.txn.Add(1)), edit, nil)
	code, out, errOut := runAudit(t, cfg, w.room)
	if code != 1 || !strings.Contains(out, w.room+" message "+asked+": text:") || !strings.Contains(out, `display:    "bot: what is the plan now?"`) ||
		strings.Count(out, " message ") != 1 {
		t.Fatalf("bot audit after a withheld edit: exit %d, want 1 and one text difference at %s\n%s%s", code, asked, out, errOut)
	}
}
