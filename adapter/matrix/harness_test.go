package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/internal/dendritetest"
)

// env is a real Dendrite with the bot's appservice registered, the bot and alice (a person) registered, and a
// private room alice created and the bot joined.
type env struct {
	srv   *dendritetest.Server
	bot   dendritetest.User
	alice dendritetest.User
	as    *AppServiceConfig
	ali   *mautrix.Client // alice's client
	room  string
}

const waitTimeout = 30 * time.Second

func newEnv(t *testing.T) *env {
	t.Helper()
	asReg := &dendritetest.AppService{ID: "agentbot", ASToken: "as-" + t.Name(), HSToken: "hs-secret", SenderLocalpart: "agentbot-as", UserPrefix: "agentbot_"}
	e := &env{srv: dendritetest.Start(t, dendritetest.Options{AppService: asReg})}
	e.as = &AppServiceConfig{ASToken: asReg.ASToken, UserPrefix: asReg.UserPrefix, ServerName: dendritetest.ServerName, SenderLocalpart: asReg.SenderLocalpart}
	e.bot = e.srv.Register(t, "bot", false)
	e.alice = e.srv.Register(t, "alice", false)
	var err error
	e.ali, err = mautrix.NewClient(e.srv.URL, id.UserID(e.alice.UserID), e.alice.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	e.ali.Log = zerolog.Nop()
	e.room = e.newRoom(t)
	return e
}

// newRoom: alice creates a private room and invites the bot; the bot joins.
func (e *env) newRoom(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	resp, err := e.ali.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(e.bot.UserID)}})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	c := e.client(t)
	if _, err := c.JoinRoom(ctx, resp.RoomID.String()); err != nil {
		t.Fatalf("bot joins: %v", err)
	}
	return resp.RoomID.String()
}

// client is a new bot client (as after a process restart: nothing cached).
func (e *env) client(t *testing.T, opts ...func(*Options)) *Client {
	t.Helper()
	opt := Options{HomeserverURL: e.srv.URL, UserID: e.bot.UserID, AccessToken: e.bot.AccessToken, AppService: e.as, SyncTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&opt)
	}
	c, err := New(opt, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sync is a /sync loop of c over tokens, handing events to h.
func (e *env) sync(t *testing.T, c *Client, tokens TokenStore, h Handler, opts ...func(*SyncOptions)) *Sync {
	t.Helper()
	var opt SyncOptions
	for _, o := range opts {
		o(&opt)
	}
	s, err := NewSync(opt, SyncDeps{Client: c, Tokens: tokens, Handler: h, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// say posts content as alice and returns the event id.
func (e *env) say(t *testing.T, content any) string {
	t.Helper()
	resp, err := e.ali.SendMessageEvent(context.Background(), id.RoomID(e.room), event.EventMessage, content)
	if err != nil {
		t.Fatalf("alice sends: %v", err)
	}
	return resp.EventID.String()
}

func text(body string) map[string]any {
	return map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{}}
}

// event fetches one event as alice, as raw JSON (what a client displays). A 404 is retried until waitTimeout:
// Dendrite's sync API, which serves it to alice, takes a sent event a moment after the send returned.
func (e *env) event(t *testing.T, eventID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		var out map[string]any
		u := e.ali.BuildClientURL("v3", "rooms", e.room, "event", eventID)
		_, err := e.ali.MakeRequest(context.Background(), http.MethodGet, u, nil, &out)
		if err == nil {
			return out
		}
		if !errors.Is(err, mautrix.MNotFound) || time.Now().After(deadline) {
			t.Fatalf("get event %s: %v", eventID, err)
		}
		<-time.After(20 * time.Millisecond) // polling the homeserver's read model until it caught up
	}
}

// marked returns the event ids (oldest first) of the room's messages carrying DeliveryKey with deliveryID, read by
// alice through /messages.
func (e *env) marked(t *testing.T, deliveryID string) []string {
	t.Helper()
	var ids []string
	from := ""
	for range 50 {
		resp, err := e.ali.Messages(context.Background(), id.RoomID(e.room), from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		for _, ev := range resp.Chunk {
			var mc struct {
				Mark *deliveryMark `json:"org.agentbot.delivery"`
			}
			if json.Unmarshal(ev.Content.VeryRaw, &mc) == nil && mc.Mark != nil && mc.Mark.ID == deliveryID {
				ids = append([]string{ev.ID.String()}, ids...)
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return ids
		}
		from = resp.End
	}
	return ids
}

// waitMarked waits until alice's /messages shows n events of deliveryID (Dendrite's sync API, which serves
// /messages, processes a sent event a moment after the send returned).
func (e *env) waitMarked(t *testing.T, deliveryID string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for len(e.marked(t, deliveryID)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("/messages shows fewer than %d events of %s after %s", n, deliveryID, waitTimeout)
		}
		<-time.After(20 * time.Millisecond) // polling the homeserver's read model until it caught up
	}
}

// waitVisible waits until eventID is in the room's /messages as alice sees them (in Dendrite's read model, so in
// every /sync position taken from now on).
func (e *env) waitVisible(t *testing.T, eventID string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := e.ali.Messages(context.Background(), id.RoomID(e.room), "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		for _, ev := range resp.Chunk {
			if ev.ID.String() == eventID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not in /messages after %s", eventID, waitTimeout)
		}
		<-time.After(20 * time.Millisecond) // polling the homeserver's read model until it caught up
	}
}

// recorder is a Handler that keeps what it was given and lets a test wait for an event.
type recorder struct {
	mu   sync.Mutex
	got  []Inbound
	cond chan struct{} // closed and replaced on every event
}

func newRecorder() *recorder { return &recorder{cond: make(chan struct{})} }

func (r *recorder) handle(_ context.Context, in Inbound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, in)
	close(r.cond)
	r.cond = make(chan struct{})
}

func (r *recorder) all() []Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Inbound(nil), r.got...)
}

// wait returns the event with id eventID (any kind), failing after waitTimeout.
func (r *recorder) wait(t *testing.T, eventID string) Inbound {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		r.mu.Lock()
		for _, in := range r.got {
			if in.EventID == eventID {
				r.mu.Unlock()
				return in
			}
		}
		ch := r.cond
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("event %s not handled within %s (handled: %d)", eventID, waitTimeout, len(r.all()))
		}
	}
}

// running is a started Run loop.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, s *Sync) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Errorf("Run did not return within %s of cancel", waitTimeout)
	}
}

// savingStore wraps a TokenStore and signals every save (a test waits for the first sync to complete).
type savingStore struct {
	TokenStore
	saved chan string
}

func (s *savingStore) SaveSyncToken(ctx context.Context, tok string) error {
	if err := s.TokenStore.SaveSyncToken(ctx, tok); err != nil {
		return err
	}
	select {
	case s.saved <- tok:
	default:
	}
	return nil
}

func (s *savingStore) waitSave(t *testing.T) {
	t.Helper()
	select {
	case <-s.saved:
	case <-time.After(waitTimeout):
		t.Fatalf("no sync token saved within %s", waitTimeout)
	}
}

func count(ins []Inbound, eventID string) int {
	n := 0
	for _, in := range ins {
		if in.EventID == eventID {
			n++
		}
	}
	return n
}
