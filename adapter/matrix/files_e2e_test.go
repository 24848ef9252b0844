package matrix

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// TestLiveFileInThread (real Dendrite): a live delivery with a file is uploaded to the media repository and posted
// as one m.file event in the thread, its caption the text; alice downloads exactly the bytes; an edit of the
// caption keeps the file; the entry records the file with its mxc URL; a resend after a restart finds the event
// instead of posting a second one.
func TestLiveFileInThread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	st := memory.New()
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.Real{}})
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: DeliverySender{Client: c}, Outbox: st, Transcripts: tr, Bindings: noBindings{}, Log: zerolog.Nop()})
	root, err := c.CreateThread(ctx, e.room, "Task", "root-1", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	thread := binding.ConversationRef{Channel: "matrix", ConversationID: root, ParentConversationID: e.room}
	data := strings.Repeat("output line\n", 5000)
	d := delivery.Delivery{ID: "acp:k:1:2", Target: thread, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"},
		Files: []delivery.File{{Name: "output.txt", ContentType: "text/plain; charset=utf-8", Data: []byte(data)}}}
	l := out.Live(ctx, d, delivery.LiveOptions{Interval: 50 * time.Millisecond})
	l.Update("📎 Full output")
	if err := l.Posted(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := l.Finish(ctx, "📎 Full output of `make` (58.6 KiB)")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.MessageIDs) != 1 {
		t.Fatalf("ids %v", res.MessageIDs)
	}
	evID := res.MessageIDs[0]
	var fc struct {
		fileContent
		Body      string `json:"body"`
		RelatesTo struct {
			RelType string `json:"rel_type"`
			EventID string `json:"event_id"`
		} `json:"m.relates_to"`
	}
	raw, _ := json.Marshal(e.event(t, evID)["content"])
	if err := json.Unmarshal(raw, &fc); err != nil {
		t.Fatal(err)
	}
	if fc.MsgType != "m.file" || fc.Filename != "output.txt" || fc.Body != "📎 Full output" || fc.Info.Size != int64(len(data)) ||
		fc.RelatesTo.RelType != "m.thread" || fc.RelatesTo.EventID != root || !strings.HasPrefix(fc.URL, "mxc://") {
		t.Fatalf("the event shows %s", raw)
	}
	uri, err := id.ParseContentURI(fc.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.ali.DownloadBytes(ctx, uri)
	if err != nil {
		t.Fatalf("alice downloads the file: %v", err)
	}
	if string(got) != data {
		t.Fatalf("alice downloads %d bytes, want the %d uploaded", len(got), len(data))
	}
	if shown := e.shownText(t, evID, "📎 Full output of `make` (58.6 KiB)"); shown != "📎 Full output of `make` (58.6 KiB)" {
		t.Fatalf("the caption shows %q", shown)
	}
	if nc := latestEdit(t, e, evID); nc["msgtype"] != "m.file" || nc["url"] != fc.URL || nc["filename"] != "output.txt" {
		t.Fatalf("the edit's new content %v drops the file", nc)
	}
	es, err := tr.Entries(ctx, sessionkey.ForConversation("main", thread), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := transcript.Attachment{Filename: "output.txt", ContentType: "text/plain; charset=utf-8", Size: int64(len(data)), URL: fc.URL}
	if len(es) != 1 || es[0].Text != "📎 Full output of `make` (58.6 KiB)" || len(es[0].Attachments) != 1 || es[0].Attachments[0] != want {
		t.Fatalf("entries %+v, want one with %+v", es, want)
	}

	// A restarted bot resending the same part finds the event (no second one).
	d.Resend, d.FirstAttempt = true, time.Now().Add(-time.Minute)
	again, shown, err := DeliverySender{Client: e.client(t)}.PostLiveFiles(ctx, d, "📎 Full output", delivery.Controls{})
	if err != nil || again != evID || len(shown) != 1 || shown[0] != want {
		t.Fatalf("resend: %s %+v %v, want %s", again, shown, err, evID)
	}
	if ids := e.marked(t, d.ID); len(ids) != 1 {
		t.Fatalf("the room holds %d events of the delivery, want 1", len(ids))
	}
	if _, _, err := (DeliverySender{Client: c}).PostLiveFiles(ctx, delivery.Delivery{ID: "two", Target: thread, Files: []delivery.File{{Name: "a"}, {Name: "b"}}}, "x", delivery.Controls{}); err == nil {
		t.Fatal("two files in one Matrix message were taken")
	}
}

// latestEdit is the m.new_content of eventID's latest edit, as alice reads the room.
func latestEdit(t *testing.T, e *env, eventID string) map[string]any {
	t.Helper()
	resp, err := e.ali.Messages(context.Background(), id.RoomID(e.room), "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range resp.Chunk {
		var mc struct {
			RelatesTo struct {
				RelType string `json:"rel_type"`
				EventID string `json:"event_id"`
			} `json:"m.relates_to"`
			NewContent map[string]any `json:"m.new_content"`
		}
		if json.Unmarshal(ev.Content.VeryRaw, &mc) == nil && mc.RelatesTo.RelType == "m.replace" && mc.RelatesTo.EventID == eventID {
			return mc.NewContent
		}
	}
	return nil
}
