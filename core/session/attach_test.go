package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model/echo"
)

// fakeFetcher serves files by URL and records what was fetched.
type fakeFetcher struct {
	mu      sync.Mutex
	files   map[string][]byte
	fetched []string
}

func (f *fakeFetcher) Fetch(_ context.Context, a transcript.Attachment, max int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, a.URL)
	b, ok := f.files[a.URL]
	if !ok {
		return nil, errors.New("404")
	}
	if int64(len(b)) > max {
		return nil, errors.New("too large")
	}
	return b, nil
}

func TestAttachmentsReachTheModel(t *testing.T) {
	notes := transcript.Attachment{Filename: "notes.txt", ContentType: "text/plain; charset=utf-8", Size: 11, URL: "https://cdn/notes"}
	code := transcript.Attachment{Filename: "main.go", Size: 12, URL: "https://cdn/code"} // by extension
	big := transcript.Attachment{Filename: "huge.log", ContentType: "text/plain", Size: session.MaxInlineText + 1, URL: "https://cdn/huge"}
	pic := transcript.Attachment{Filename: "cat.png", ContentType: "image/png", Size: 4, URL: "https://cdn/cat"}
	zip := transcript.Attachment{Filename: "a.zip", ContentType: "application/zip", Size: 9, URL: "https://cdn/zip"}
	all := []transcript.Attachment{notes, code, big, pic, zip}
	for _, vision := range []bool{false, true} {
		ff := &fakeFetcher{files: map[string][]byte{"https://cdn/notes": []byte("hello notes"), "https://cdn/code": []byte("package main"), "https://cdn/cat": []byte("PNG!")}}
		g := newGate(echo.New())
		f := newFixture(t, fixtureOptions{provider: g, fetcher: ff, vision: vision})
		err := f.m.HandleMessage(context.Background(), session.Message{Conversation: ref("c1"), MessageID: "900", AuthorID: "u1", AuthorName: "alice", Text: "look", Attachments: all})
		if err != nil {
			t.Fatal(err)
		}
		req := g.waitEntered(t)
		g.release <- struct{}{}
		f.settle()
		msg := req.Messages[len(req.Messages)-1]
		for _, want := range []string{"look", "hello notes", "package main", "huge.log (text/plain, 65537 bytes): not shown", "a.zip (application/zip, 9 bytes): not shown"} {
			if !strings.Contains(msg.Text, want) {
				t.Errorf("vision=%v: model text lacks %q:\n%s", vision, want, msg.Text)
			}
		}
		if vision {
			if len(msg.Images) != 1 || msg.Images[0].MediaType != "image/png" || string(msg.Images[0].Data) != "PNG!" {
				t.Errorf("vision: images %+v, want cat.png", msg.Images)
			}
		} else {
			if len(msg.Images) != 0 || !strings.Contains(msg.Text, "cat.png (image/png, 4 bytes): this model does not see images") {
				t.Errorf("no vision: images %d, text %q: want the image named", len(msg.Images), msg.Text)
			}
		}
		if slices.Contains(ff.fetched, big.URL) || slices.Contains(ff.fetched, zip.URL) {
			t.Errorf("fetched %v: files over the cap or not text must not be fetched", ff.fetched)
		}
		es := f.entries(keyOf("c1"))
		if !slices.Equal(es[0].Attachments, all) || es[0].Text != "look" {
			t.Errorf("user entry %+v: want the displayed text and every attachment", es[0])
		}
	}
}
