package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
)

// fileSender is a liveSender that attaches files: a post under a key it
// saw before returns the first message (with the files it was first
// given), like a nonce; the files are "displayed" when the post is made
// (before a hang), as Discord does.
type fileSender struct {
	*liveSender
	files map[string][]delivery.File // delivery id -> the files its message shows
	posts int                        // PostLiveFiles calls
}

func (s *fileSender) PostLiveFiles(ctx context.Context, d delivery.Delivery, text string, c delivery.Controls) (string, []transcript.Attachment, error) {
	s.mu.Lock()
	s.posts++
	if _, ok := s.files[d.ID]; !ok {
		s.files[d.ID] = d.Files
	}
	shown := s.files[d.ID]
	s.mu.Unlock()
	id, err := s.PostLive(ctx, d, 0, text, c)
	if err != nil {
		return "", nil, err
	}
	var out []transcript.Attachment
	for _, f := range shown {
		out = append(out, transcript.Attachment{Filename: f.Name, ContentType: f.ContentType, Size: int64(len(f.Data)), URL: "https://cdn.test/" + id + "/" + f.Name})
	}
	return id, out, nil
}

func newFileFixture(t *testing.T) (*liveFixture, *fileSender) {
	f := newLiveFixture(t, 2000)
	fs := &fileSender{liveSender: f.sender, files: map[string][]delivery.File{}}
	f.out = delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: fs, Outbox: f.store, Transcripts: f.tr,
		Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop(), Redact: redact.New(testAPIKey)})
	return f, fs
}

func fileDelivery(id string, data string) delivery.Delivery {
	d := liveDelivery(id)
	d.Files = []delivery.File{{Name: "output.txt", ContentType: "text/plain; charset=utf-8", Data: []byte(data)}}
	return d
}

// TestLiveFileAttachedAndRecorded: a live delivery with a file posts it
// with its first message, once; the entry holds the text displayed and
// the file as the platform shows it (name, type, size, URL); the file is
// redacted like the text (invariant 14).
func TestLiveFileAttachedAndRecorded(t *testing.T) {
	f, fs := newFileFixture(t)
	l := f.out.Live(context.Background(), fileDelivery("cmd:1", "line 1\nkey="+testAPIKey+"\n"), delivery.LiveOptions{After: f.after.after})
	if _, err := l.Finish(context.Background(), "📎 full output"); err != nil {
		t.Fatal(err)
	}
	f.checkRule1(t, "📎 full output")
	if fs.posts != 1 {
		t.Fatalf("%d file posts, want 1", fs.posts)
	}
	got := string(fs.files["cmd:1"][0].Data)
	if strings.Contains(got, testAPIKey) || got != "line 1\nkey=[redacted]\n" {
		t.Fatalf("file shows %q, want it redacted", got)
	}
	es := f.entries(t)
	want := transcript.Attachment{Filename: "output.txt", ContentType: "text/plain; charset=utf-8", Size: int64(len(got)), URL: "https://cdn.test/" + es[0].MessageIDs[0] + "/output.txt"}
	if len(es[0].Attachments) != 1 || es[0].Attachments[0] != want {
		t.Fatalf("entry attachments %+v, want [%+v]", es[0].Attachments, want)
	}
}

// TestLiveFileRecoverAfterCrash: the process dies during the file post
// (the message is displayed, its id never recorded): Recover posts again
// under the same key, which finds the message (no second one, the file
// once), and writes the entry once with the file as shown.
func TestLiveFileRecoverAfterCrash(t *testing.T) {
	f, fs := newFileFixture(t)
	f.sender.hang = func(r liveReq) bool { return r.post }
	l := f.out.Live(context.Background(), fileDelivery("cmd:1", "all of it\n"), delivery.LiveOptions{After: f.after.after})
	l.Update("📎 full output")
	f.sender.waitReqs(t, 1)
	f.sender.mu.Lock()
	f.sender.hang = nil
	f.sender.mu.Unlock()
	second := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: fs, Outbox: f.store, Transcripts: f.tr,
		Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop()})
	if n, err := second.Recover(context.Background(), f.clk.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("recovered %d, err %v", n, err)
	}
	if len(f.sender.order) != 1 || fs.posts != 2 {
		t.Fatalf("%d messages after %d file posts, want 1 message (the re-post finds it)", len(f.sender.order), fs.posts)
	}
	f.checkRule1(t, "📎 full output"+delivery.InterruptedMark)
	es := f.entries(t)
	if len(es[0].Attachments) != 1 || es[0].Attachments[0].Size != int64(len("all of it\n")) {
		t.Fatalf("entry attachments %+v", es[0].Attachments)
	}
}

// TestLiveFileRefusedWithoutFilePoster: a platform that cannot attach
// files displays nothing and records nothing (a failed delivery), and
// Deliver refuses files (only a live delivery attaches them); too large
// a file is refused before anything is sent.
func TestLiveFileRefusedWithoutFilePoster(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.out.Live(context.Background(), fileDelivery("cmd:1", "x"), delivery.LiveOptions{After: f.after.after})
	if _, err := l.Finish(context.Background(), "📎 full output"); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("finish: %v, want ErrRejected", err)
	}
	if texts, _, _ := f.sender.display(); len(texts) != 0 || len(f.entries(t)) != 0 {
		t.Fatalf("displayed %q, entries %+v", texts, f.entries(t))
	}
	d := fileDelivery("send:1", "x")
	d.Text = "hi"
	if _, err := f.out.Deliver(context.Background(), d, nil); !errors.Is(err, delivery.ErrInvalidDelivery) {
		t.Fatalf("deliver with files: %v, want ErrInvalidDelivery", err)
	}

	g, fs := newFileFixture(t)
	big := g.out.Live(context.Background(), fileDelivery("cmd:2", strings.Repeat("x", delivery.MaxFileBytes+1)), delivery.LiveOptions{After: g.after.after})
	if _, err := big.Finish(context.Background(), "📎 full output"); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("finish with a big file: %v, want ErrRejected", err)
	}
	if fs.posts != 0 || len(g.entries(t)) != 0 {
		t.Fatalf("a file over the limit was posted (%d) or recorded", fs.posts)
	}
}
