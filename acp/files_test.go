package acp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// liveFiles holds the files each fakeLive's messages carry (by message id).
var liveFiles sync.Map // *fakeLive -> *shownFiles

type shownFiles struct {
	mu sync.Mutex
	m  map[string][]delivery.File
}

func filesOf(f *fakeLive) *shownFiles {
	v, _ := liveFiles.LoadOrStore(f, &shownFiles{m: map[string][]delivery.File{}})
	return v.(*shownFiles)
}

var _ delivery.FilePoster = (*fakeLive)(nil)

// PostLiveFiles posts part 0 with its files, as strictly as Discord: a
// repeat under the same key returns the first message and its files.
func (f *fakeLive) PostLiveFiles(ctx context.Context, d delivery.Delivery, text string, c delivery.Controls) (string, []transcript.Attachment, error) {
	id, err := f.PostLive(ctx, d, 0, text, c)
	if err != nil {
		return "", nil, err
	}
	sf := filesOf(f)
	sf.mu.Lock()
	if _, ok := sf.m[id]; !ok {
		sf.m[id] = d.Files
	}
	var out []transcript.Attachment
	for _, file := range sf.m[id] {
		out = append(out, transcript.Attachment{Filename: file.Name, ContentType: file.ContentType, Size: int64(len(file.Data)), URL: "https://files.test/" + id + "/" + file.Name})
	}
	sf.mu.Unlock()
	f.h.changed()
	return id, out, nil
}

func (f *fakeLive) files(id string) []delivery.File {
	sf := filesOf(f)
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.m[id]
}

// TestCommandOutputAttached: a command whose output its message cannot
// show whole gets a message of its own below it with output.txt, the
// whole output as plain text; the transcript entry of that message
// records the file (name, type, size, URL); a short output gets no file;
// output past outputByteLimit is attached as kept (its end), and the
// caption says so. Transcript == display (Rule 1).
func TestCommandOutputAttached(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	f.say(res, "alice", "run seq 1 300")
	f.waitShown("ran exit=0")
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	file := f.waitShown("📎 Full output of `sh -c 'seq 1 300'`")
	if got := f.live.files(file.id); len(got) != 1 || got[0].Name != "output.txt" || string(got[0].Data) != want.String() {
		t.Fatalf("file message %q carries %+v, want output.txt with the whole output", file.text, got)
	}
	cmd, _ := f.live.find("💻 `sh -c 'seq 1 300'`")
	if strings.Contains(cmd.text, "\n1\n") || !strings.Contains(cmd.text, "\n300\n") {
		t.Errorf("command message %q: want the last lines only", cmd.text)
	}
	var entry transcript.Entry
	f.h.wait(t, "the file message's entry", func() bool {
		for _, e := range f.entries(res.SessionKey) {
			if len(e.MessageIDs) == 1 && e.MessageIDs[0] == file.id {
				entry = e
				return true
			}
		}
		return false
	})
	wantAtt := transcript.Attachment{Filename: "output.txt", ContentType: "text/plain; charset=utf-8", Size: int64(want.Len()), URL: "https://files.test/" + file.id + "/output.txt"}
	if entry.Text != file.text || len(entry.Attachments) != 1 || entry.Attachments[0] != wantAtt {
		t.Fatalf("entry %q with %+v, want %q with [%+v]", entry.Text, entry.Attachments, file.text, wantAtt)
	}

	f.say(res, "alice", "run echo short")
	f.waitShown("💻 `sh -c 'echo short'` in `.` · ✅ exit 0")
	f.say(res, "alice", "run limit=100 seq 1 300")
	cut := f.waitShown("📎 Output of `sh -c 'seq 1 300'`: the last")
	if got := f.live.files(cut.id); len(got) != 1 || !strings.HasSuffix(string(got[0].Data), "299\n300\n") || len(got[0].Data) > 100 {
		t.Fatalf("file of the capped output %+v", got)
	}
	f.waitShown("truncated=true output=")
	for _, m := range f.live.snapshot() {
		if strings.Contains(m.text, "echo short") && strings.HasPrefix(m.text, "📎") {
			t.Errorf("a short output got a file: %q", m.text)
		}
	}
	n := 0
	for _, m := range f.live.snapshot() {
		if strings.HasPrefix(m.text, "📎") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d file messages, want 2", n)
	}
	f.waitEntries(res.SessionKey, len(f.live.snapshot()))
	f.checkRule1(res.SessionKey)
}
