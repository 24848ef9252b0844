package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestAttachmentsFetchedOnceAcrossTurns (issue 26.7, invariant 20): an
// attachment in the history window is fetched once, not again by every
// later turn whose history holds it (its URL's signature query may differ).
func TestAttachmentsFetchedOnceAcrossTurns(t *testing.T) {
	t.Parallel()
	pic := transcript.Attachment{Filename: "cat.png", ContentType: "image/png", Size: 4, URL: "https://cdn/cat?ex=1"}
	notes := transcript.Attachment{Filename: "notes.txt", ContentType: "text/plain", Size: 11, URL: "https://cdn/notes"}
	ff := &fakeFetcher{files: map[string][]byte{pic.URL: []byte("PNG!"), notes.URL: []byte("hello notes"), "https://cdn/cat?ex=2": []byte("PNG!")}}
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g, fetcher: ff, vision: true})
	ctx := context.Background()
	send := func(id, text string, as ...transcript.Attachment) model.Request {
		t.Helper()
		if err := f.m.HandleMessage(ctx, session.Message{Conversation: ref("c1"), MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: text, Attachments: as}); err != nil {
			t.Fatal(err)
		}
		req := g.waitEntered(t)
		g.release <- struct{}{}
		f.settle()
		return req
	}
	send("901", "look", pic, notes)
	send("902", "and now?")
	req := send("903", "once more")
	first := req.Messages[0]
	if len(first.Images) != 1 || !strings.Contains(first.Text, "hello notes") {
		t.Fatalf("third turn's first message %+v: want the cached image and file", first)
	}
	pic2 := pic
	pic2.URL = "https://cdn/cat?ex=2" // the same attachment, a fresh signature
	send("904", "again", pic2)
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if len(ff.fetched) != 2 {
		t.Fatalf("fetched %v over four turns, want each attachment once", ff.fetched)
	}
}

// TestRequestAttachmentBytesCapped (invariant 20): one model request
// carries at most Options.RequestAttachmentBytes of attachments, the
// newest message's first; older ones are named only.
func TestRequestAttachmentBytesCapped(t *testing.T) {
	t.Parallel()
	old := transcript.Attachment{Filename: "old.png", ContentType: "image/png", Size: 4, URL: "https://cdn/old"}
	cur := transcript.Attachment{Filename: "new.png", ContentType: "image/png", Size: 4, URL: "https://cdn/new"}
	ff := &fakeFetcher{files: map[string][]byte{old.URL: []byte("OLD!"), cur.URL: []byte("NEW!")}}
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g, fetcher: ff, vision: true, opts: session.Options{RequestAttachmentBytes: 6}})
	ctx := context.Background()
	var req model.Request
	for i, a := range []transcript.Attachment{old, cur} {
		if err := f.m.HandleMessage(ctx, session.Message{Conversation: ref("c1"), MessageID: []string{"911", "912"}[i], AuthorID: "u1", AuthorName: "alice", Text: "see", Attachments: []transcript.Attachment{a}}); err != nil {
			t.Fatal(err)
		}
		req = g.waitEntered(t)
		g.release <- struct{}{}
		f.settle()
	}
	var total int
	for _, msg := range req.Messages {
		for _, im := range msg.Images {
			total += len(im.Data)
		}
	}
	last := req.Messages[len(req.Messages)-1]
	if total > 6 || len(last.Images) != 1 || string(last.Images[0].Data) != "NEW!" {
		t.Fatalf("request carries %d attachment bytes (cap 6), newest message images %d", total, len(last.Images))
	}
	if !strings.Contains(req.Messages[0].Text, "old.png") || !strings.Contains(req.Messages[0].Text, "attachment limit") {
		t.Fatalf("the older image is not named: %q", req.Messages[0].Text)
	}
}

// TestSpawnSubagentChargedToSpawner (invariant 20): spawn_subagent takes a
// turn of the spawning user's budget; with none left it is refused.
func TestSpawnSubagentChargedToSpawner(t *testing.T) {
	t.Parallel()
	p := &modeltest.Scripted{Fallback: echoFallback}
	p.Push(modeltest.Step{Resp: model.Response{ToolCalls: []model.ToolCall{{ID: "s1", Name: "spawn_subagent", Arguments: `{"task":"dig"}`}}}})
	b := &fakeBudget{}
	f := newFixture(t, fixtureOptions{provider: p, budget: b})
	f.say(ref("c1"), "spawn one")
	f.settle()
	if n := len(f.subagents()); n != 0 || len(b.took) != 1 {
		t.Fatalf("%d subagents started, budget asked %d times: want the spawn refused by the spent budget", n, len(b.took))
	}
	reqs := p.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.Contains(last[len(last)-1].Text, "budget") {
		t.Fatalf("the tool result does not say why: %+v", last[len(last)-1])
	}
}
