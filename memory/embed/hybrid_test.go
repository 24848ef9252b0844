package embed_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/memory/memorytest"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/memory/bleveindex"
	"github.com/agentbot/agentbot/memory/embed"
	"github.com/agentbot/agentbot/memory/embed/embedtest"
	"github.com/agentbot/agentbot/store/bolt"
)

type hybrid struct {
	t      *testing.T
	st     *bolt.Store
	vf     bolt.RecallVectors
	svc    *transcript.Service
	ix     *memory.Indexer
	rc     *memory.Recall
	health *memory.Health
	clock  *clock.Fake
	msg    int
}

func newHybrid(t *testing.T, srv *embedtest.Server) *hybrid {
	path := filepath.Join(t.TempDir(), "bot.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bleveindex.Open(bleveindex.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idx.Close(); _ = st.Close() })
	vf := st.RecallVectors()
	cl, err := embed.New(embed.Config{BaseURL: srv.URL, Model: "fake-embed", Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &hybrid{t: t, st: st, vf: vf, health: &memory.Health{}, clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))}
	h.svc = transcript.New(transcript.Options{}, transcript.Deps{Store: h.st, Clock: h.clock})
	h.ix = memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: h.st, Entries: h.st, Index: idx,
		Vectors: vf, Embedder: cl, Health: h.health, Log: zerolog.Nop()})
	h.rc = memory.NewRecall(memory.RecallOptions{}, memory.RecallDeps{Index: idx, Entries: h.st,
		Viewer:  authz.New(authz.Config{}, memorytest.Directory{"general": {"alice", "bob"}, "secret": {"bob"}}),
		Vectors: vf, Embedder: cl, Health: h.health, Clock: h.clock})
	return h
}

func (h *hybrid) say(channel, text string) string {
	h.t.Helper()
	h.msg++
	h.clock.Advance(time.Minute)
	id := "m" + string(rune('a'+h.msg))
	if _, err := h.svc.Append(h.t.Context(), memorytest.Channel(channel), transcript.Entry{Role: transcript.RoleUser, Author: "alice",
		Text: text, MessageIDs: []string{id}, Source: transcript.SourceUser}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// index applies the queued changes; embed also computes the vectors,
// reporting the embedding step's error.
func (h *hybrid) index() {
	h.t.Helper()
	for {
		n, err := h.ix.Step(h.t.Context())
		if err != nil {
			h.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func (h *hybrid) embed() error {
	for {
		n, err := h.ix.EmbedStep(h.t.Context())
		if err != nil || n == 0 {
			return err
		}
	}
}

func (h *hybrid) want(user, q string, want ...string) {
	h.t.Helper()
	fs, err := h.rc.Search(h.t.Context(), user, q, 5)
	if err != nil {
		h.t.Fatalf("%s searching %q: %v", user, q, err)
	}
	got := []string{}
	for _, f := range fs {
		got = append(got, f.Doc.Text)
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("%s searching %q found %q, want %q", user, q, got, want)
	}
}

// TestHybridRecall: with embeddings a query finds what it means without
// its words, within the user's view; with the endpoint down, recall and
// indexing go on by keywords, and the vectors catch up when it answers.
func TestHybridRecall(t *testing.T) {
	srv := embedtest.New(t)
	h := newHybrid(t, srv)
	auto := h.say("general", "my new automobile is red")
	h.say("general", "the kitten sleeps all day")
	h.say("general", "the weather is fine today")
	h.say("secret", "the sedan is parked outside")
	h.index()
	if err := h.embed(); err != nil {
		t.Fatal(err)
	}
	h.want("alice", "car", "my new automobile is red")                              // no word in common
	h.want("bob", "car", "the sedan is parked outside", "my new automobile is red") // both of bob's view
	h.want("alice", "kitten", "the kitten sleeps all day")                          // keyword and meaning agree
	h.want("alice", "weather kitten", "the kitten sleeps all day", "the weather is fine today")

	// The endpoint goes down: searches rank by keywords alone, indexing
	// goes on, and the failure is recorded.
	srv.Down.Store(true)
	h.want("alice", "kitten", "the kitten sleeps all day")
	h.want("alice", "car")
	if _, err := h.health.Last(); err == nil {
		t.Fatal("health records no failure while the endpoint is down")
	}
	h.say("general", "we bought a vehicle")
	h.index()
	h.want("alice", "vehicle", "we bought a vehicle")
	if err := h.embed(); err == nil {
		t.Fatal("embedding while the endpoint is down did not fail")
	}
	if n, err := h.vf.Pending(t.Context()); err != nil || n != 1 {
		t.Fatalf("pending = %d, %v; want the new entry queued", n, err)
	}

	// Back up: the queued entry gets its vector.
	srv.Down.Store(false)
	if err := h.embed(); err != nil {
		t.Fatal(err)
	}
	h.want("alice", "car", "we bought a vehicle", "my new automobile is red")
	if _, err := h.health.Last(); err != nil {
		t.Fatalf("health = %v after the endpoint answered", err)
	}

	// A deleted message's vector goes with it; an edit's new text gets one.
	if ok, err := h.svc.Delete(t.Context(), auto); err != nil || !ok {
		t.Fatalf("delete = %v, %v", ok, err)
	}
	h.index()
	h.want("alice", "car", "we bought a vehicle")
	_, texts := srv.Calls()
	if err := h.embed(); err != nil {
		t.Fatal(err)
	}
	if _, again := srv.Calls(); again != texts {
		t.Fatalf("%d texts embedded again after a deletion; want none", again-texts)
	}
}
