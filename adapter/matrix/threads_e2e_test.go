package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// core is the core's outbound side over a memory store, sending through a Matrix client.
type core struct {
	st  *memory.Store
	tr  *transcript.Service
	out *delivery.Outbound
}

func newCore(t *testing.T, c *Client, b delivery.Bindings) *core {
	t.Helper()
	if b == nil {
		b = noBindings{}
	}
	st := memory.New()
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.Real{}})
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: platform.New(platform.Platform{Name: "discord", Sender: notDiscord{t}}, platform.Platform{Name: "matrix", Sender: DeliverySender{Client: c}}),
		Outbox: st, Transcripts: tr, Bindings: b, Log: zerolog.Nop()})
	return &core{st: st, tr: tr, out: out}
}

func (k *core) entries(t *testing.T, conv binding.ConversationRef) []transcript.Entry {
	t.Helper()
	es, err := k.tr.Entries(context.Background(), sessionkey.ForConversation("main", conv), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func newThreads(t *testing.T, out Deliverer, nonces ...string) *Threads {
	t.Helper()
	var mu sync.Mutex
	d := ThreadsDeps{Outbound: out}
	if len(nonces) > 0 {
		d.NewNonce = func() string {
			mu.Lock()
			defer mu.Unlock()
			n := nonces[0]
			nonces = nonces[1:]
			return n
		}
	}
	th, err := NewThreads(ThreadsOptions{RetryBackoff: 10 * time.Millisecond}, d)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// TestThreadsCreateThread: a thread is a root event in the room, named by its text; the root is a bot message the
// room displays, so it is an entry of the room's transcript (Rule 1); a thread's thread goes into the room; a DM
// has none; two creates with one name are two threads (two spawns with one label).
func TestThreadsCreateThread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := newCore(t, c, nil)
	th := newThreads(t, k.out)
	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}

	ref, err := th.CreateThread(ctx, room, "🤖 review")
	if err != nil {
		t.Fatal(err)
	}
	if ref.Channel != "matrix" || !strings.HasPrefix(ref.ConversationID, "$") || ref.ParentConversationID != e.room {
		t.Fatalf("thread ref %+v, want a root event in %s", ref, e.room)
	}
	ev := e.event(t, ref.ConversationID)
	if ev["sender"] != e.bot.UserID || ev["content"].(map[string]any)["body"] != "🤖 review" {
		t.Fatalf("root shows %v", ev)
	}
	if es := k.entries(t, room); len(es) != 1 || es[0].Text != "🤖 review" || len(es[0].MessageIDs) != 1 || es[0].MessageIDs[0] != ref.ConversationID {
		t.Fatalf("room entries %+v, want the root once", es)
	}
	// The thread takes messages (the ref is what a binding and the sender use).
	res, err := k.out.Deliver(ctx, delivery.Delivery{ID: "intro:1", Target: ref, Text: "hello thread", Producer: delivery.Producer{Source: transcript.SourceIntro}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rel, _ := e.event(t, res.MessageIDs[0])["content"].(map[string]any)["m.relates_to"].(map[string]any); rel["event_id"] != ref.ConversationID {
		t.Fatalf("the thread's message relates %v", rel)
	}

	again, err := th.CreateThread(ctx, ref, "🤖 review")
	if err != nil {
		t.Fatal(err)
	}
	if again.ParentConversationID != e.room || again.ConversationID == ref.ConversationID {
		t.Fatalf("second thread (from inside the first, same name) %+v; want a new root in the room", again)
	}

	_, err = th.CreateThread(ctx, binding.ConversationRef{Channel: "matrix", ConversationID: "user:" + e.alice.UserID}, "x")
	if !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("thread in a DM: %v, want ErrRejected", err)
	}
}

// dropAfterSend forwards the first message PUT to the homeserver, then (its event displayed) restarts the
// homeserver and loses the response: the caller cannot know the root was posted, and the homeserver forgot the
// transaction id.
type dropAfterSend struct {
	t       *testing.T
	e       *env
	base    http.RoundTripper
	mu      sync.Mutex
	dropped bool
	posted  string
}

func (d *dropAfterSend) RoundTrip(r *http.Request) (*http.Response, error) {
	d.mu.Lock()
	first := !d.dropped && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/m.room.message/")
	if first {
		d.dropped = true
	}
	d.mu.Unlock()
	resp, err := d.base.RoundTrip(r)
	if !first || err != nil {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sent struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(body, &sent) != nil || sent.EventID == "" {
		return &http.Response{StatusCode: resp.StatusCode, Body: io.NopCloser(bytes.NewReader(body)), Header: resp.Header, Request: r}, nil
	}
	d.posted = sent.EventID
	d.e.waitVisible(d.t, sent.EventID) // displayed (Dendrite loses an event its sync API has not taken when it stops)
	d.e.srv.Restart(d.t)
	return nil, errors.New("connection reset by peer (test: response lost)")
}

// TestThreadsNoDuplicateAcrossHomeserverRestart: the root's post reached the homeserver, its answer was lost and
// the homeserver restarted (forgetting the transaction id): the retry finds the root by its delivery mark and
// returns it; the room shows one root. (A blind retry of the transaction id, mautrix's own, posts a second root.)
func TestThreadsNoDuplicateAcrossHomeserverRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	drop := &dropAfterSend{t: t, e: e, base: http.DefaultTransport}
	c, err := New(Options{HomeserverURL: e.srv.URL, UserID: e.bot.UserID, AccessToken: e.bot.AccessToken, AppService: e.as, SyncTimeout: 5 * time.Second},
		Deps{HTTPClient: &http.Client{Transport: drop, Timeout: time.Minute}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	c.bot.DefaultHTTPBackoff = 10 * time.Millisecond // a blind retry, if any, comes at once (the restart is done)
	k := newCore(t, c, nil)
	th := newThreads(t, k.out, "n1")
	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}

	ref, err := th.CreateThread(ctx, room, "🤖 once")
	if err != nil {
		t.Fatal(err)
	}
	if !drop.dropped || drop.posted == "" {
		t.Fatal("the transport never lost a send's answer: the test did not test")
	}
	did := threadDeliveryID(e.room, "🤖 once", "n1")
	e.waitMarked(t, did, 1)
	if got := e.marked(t, did); len(got) != 1 || got[0] != drop.posted || ref.ConversationID != drop.posted {
		t.Fatalf("room shows roots %v, thread %s; want only the first post %s", got, ref.ConversationID, drop.posted)
	}
	if es := k.entries(t, room); len(es) != 1 || es[0].MessageIDs[0] != drop.posted {
		t.Fatalf("room entries %+v, want the root once", es)
	}
}
