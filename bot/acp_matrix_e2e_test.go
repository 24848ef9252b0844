package bot

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/rule1"
)

// TestMatrixE2EACPCommandOutputFile (real Dendrite): an operator binds an
// ACP agent to a Matrix thread (`!spawn ... agent=script`); its command
// is shown in the thread as on Discord, without the Kill button (Matrix
// has none: an optional button is left out, `!stop` ends the turn and its
// commands); its output past the message comes as output.txt, an m.file
// event in the thread whose downloaded bytes are the output; the entry
// records the file with its mxc URL; Rule 1 holds on both platforms.
func TestMatrixE2EACPCommandOutputFile(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	bin := acptest.Build(t)
	h := startMatrixBot(t, w, func(c *config.Config) {
		c.Matrix.Operators = []string{w.alice.UserID} // acp users are Discord ids: operators start agents on Matrix
		c.ACP.Agents = map[string]config.ACPAgentConfig{"script": {Command: bin, Workspace: t.TempDir(), MaxSessions: 2,
			Sandbox: config.SandboxNone, Approve: config.ApproveAgent, Terminal: true, CommandTimeout: time.Hour}}
	})
	w.say(t, w.room, "", "!spawn run seq 1 300 agent=script", false)
	var root, key, fileID string
	waitFor(t, "the thread with the command's file", func() bool {
		d := w.display(t, w.room)
		for _, m := range d.Messages(w.room) {
			if k := regexp.MustCompile("session `([^`]+)`").FindStringSubmatch(m.Content); m.FromBot && k != nil {
				key = k[1]
			}
		}
		for _, r := range d.threadsOf(w.room) {
			for _, m := range d.Messages(r) {
				if m.FromBot && strings.HasPrefix(m.Content, "📎 Full output of `sh -c 'seq 1 300'`") {
					root, fileID = r, m.ID
				}
			}
		}
		return key != "" && fileID != ""
	})
	waitFor(t, "the command's final message", func() bool {
		for _, m := range w.display(t, w.room).Messages(root) {
			if m.FromBot && strings.HasPrefix(m.Content, "💻 `sh -c 'seq 1 300'` in `.` · ✅ exit 0") && strings.Contains(m.Content, "\n300\n```") {
				return true
			}
		}
		return false
	})
	var ev struct {
		Content struct {
			MsgType  string `json:"msgtype"`
			Filename string `json:"filename"`
			URL      string `json:"url"`
		} `json:"content"`
	}
	w.do(t, w.alice.AccessToken, "GET", "/rooms/"+url.PathEscape(w.room)+"/event/"+url.PathEscape(fileID), nil, &ev)
	if ev.Content.MsgType != "m.file" || ev.Content.Filename != "output.txt" {
		t.Fatalf("the file message is %+v", ev.Content)
	}
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	ali, err := mautrix.NewClient(w.srv.URL, id.UserID(w.alice.UserID), w.alice.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	uri, err := id.ParseContentURI(ev.Content.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ali.DownloadBytes(context.Background(), uri)
	if err != nil || string(got) != want.String() {
		t.Fatalf("alice downloads %d bytes (%v), want the command's %d", len(got), err, want.Len())
	}
	chat := func() rule1.Display { return rule1.Multi{rule1.Emulator(h.emu), w.display(t, w.room)} }
	st := finishBotOn(t, h, chat, h.general.ID, w.room, root)
	es, err := st.Range(context.Background(), key, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if len(e.Attachments) > 0 {
			n++
			if a := e.Attachments[0]; len(e.MessageIDs) != 1 || e.MessageIDs[0] != fileID || a.URL != ev.Content.URL || a.Filename != "output.txt" || a.Size != int64(want.Len()) {
				t.Errorf("entry %+v, want message %s with %s", e, fileID, ev.Content.URL)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d entries with attachments in %s, want 1", n, key)
	}
}
