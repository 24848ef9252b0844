package bot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/transcript"
)

// TestE2EACPCommandOutputFile: a command printing more than its message
// can show gets output.txt in a message of its own below the command's:
// the emulator (multipart, as strict as Discord) shows the file and
// serves exactly the command's output; the thread's transcript entry for
// that message records the file (name, type, size, URL as Discord gave
// it); transcript == display (Rule 1).
func TestE2EACPCommandOutputFile(t *testing.T) {
	t.Parallel()
	h, _ := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command, c.Terminal, c.CommandTimeout = acptest.Build(t), true, time.Hour
		c.Sandbox, c.Approve = config.SandboxNone, config.ApproveAgent
	})
	in := adInvoke(t, h, h.general.ID, "spawn", discordtest.CommandOption{Name: "task", Value: "run seq 1 2000"}, discordtest.CommandOption{Name: "agent", Value: "script"})
	r := adResponded(t, h, in)
	m := regexp.MustCompile("session `([^`]+)`").FindStringSubmatch(r.Content)
	if m == nil {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	key := m[1]
	thread := h.emu.Threads(h.general.ID)[0]
	acpMessage(t, h, thread.ID, "ran exit=0")
	file := acpMessage(t, h, thread.ID, "📎 Full output of `sh -c 'seq 1 2000'`")
	var want strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if len(file.Attachments) != 1 || file.Attachments[0].Filename != "output.txt" || file.Attachments[0].Size != want.Len() {
		t.Fatalf("file message %q carries %+v", file.Content, file.Attachments)
	}
	resp, err := http.Get(file.Attachments[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != want.String() {
		t.Fatalf("output.txt holds %d bytes, want the command's %d", len(got), want.Len())
	}
	cmd := acpMessage(t, h, thread.ID, "💻 `sh -c 'seq 1 2000'` in `.` · ✅ exit 0")
	if !strings.Contains(cmd.Content, "\n2000\n```") || len([]rune(cmd.Content)) > 2000 {
		t.Errorf("the command's message %q: want the last lines, under the limit", cmd.Content)
	}
	st := finishBot(t, h, h.general.ID, thread.ID)
	es, err := st.Range(context.Background(), key, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	a := file.Attachments[0]
	wantAtt := transcript.Attachment{Filename: "output.txt", ContentType: a.ContentType, Size: int64(a.Size), URL: a.URL}
	n := 0
	for _, e := range es {
		if len(e.Attachments) == 0 {
			continue
		}
		n++
		if len(e.MessageIDs) != 1 || e.MessageIDs[0] != file.ID || e.Text != file.Content || len(e.Attachments) != 1 || e.Attachments[0] != wantAtt ||
			!strings.HasPrefix(a.ContentType, "text/plain") {
			t.Errorf("entry %+v, want message %s with %+v", e, file.ID, wantAtt)
		}
	}
	if n != 1 {
		t.Errorf("%d entries with attachments, want 1", n)
	}
}
