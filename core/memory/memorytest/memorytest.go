// Package memorytest is the conformance suite of recall indexes and the
// stores' change feeds (core/memory): run against the bleve index over
// the bbolt store and the PostgreSQL index over its store. It drives the
// real transcript Service, Indexer and Recall, with the real authority
// over a fake platform directory.
//
// Invariant: what a case asserts holds for every implementation: edits
// re-index, erased text is never found, /reset hides nothing from recall,
// a change applied twice changes nothing, and nobody finds what they
// cannot view.
package memorytest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/storetest"
)

// Store is a transcript store that queues its changes.
type Store interface {
	transcript.Store
	memory.Feed
}

// Pair is a store and the index kept beside it.
type Pair struct {
	Store Store
	Index memory.Index
}

// Option configures Run.
type Option = storetest.Option[Pair]

// WithReopen supplies a hook that closes both and reopens them over the
// same data (a crash and a restart).
func WithReopen(fn func(t *testing.T, p Pair) Pair) Option { return storetest.WithReopen(fn) }

// Run runs the suite; open returns a new, empty store and index.
func Run(t *testing.T, open func(t *testing.T) Pair, opts ...Option) {
	storetest.Run(t, open, opts, []storetest.Case[Pair]{
		{Name: "FindsBothRolesNewestFirst", Fn: testFinds},
		{Name: "EditReindexes", Fn: testEdit},
		{Name: "DeletedNeverFound", Fn: testDelete},
		{Name: "ErasedBeforeItsRecordNeverFound", Fn: testEraseWindow},
		{Name: "ResetStillFound", Fn: testReset},
		{Name: "ReplayChangesNothing", Fn: testReplay},
		{Name: "RebuildMatchesFollowing", Fn: testRebuild},
		{Name: "OnlyWhatTheUserMayView", Fn: testView},
		{Name: "OnlyDisplayedConversationEntries", Fn: testNotIndexed},
		{Name: "SubagentAndJobRunEntriesByOwnerAndViewers", Fn: testOwned},
		{Name: "QueuedChangesSurviveRestart", Fn: testRestart},
	})
}

// Directory is a fake platform: who may view which guild channel.
type Directory map[string][]string // channel id -> users who can view it

// Access implements authz.Directory.
func (d Directory) Access(_ context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	users, ok := d[conv.ConversationID]
	return authz.Access{Exists: ok, UserView: slices.Contains(users, userID), BotView: true, BotSend: true, UserSend: true}, nil
}

// Member implements authz.Directory.
func (d Directory) Member(context.Context, string, binding.ConversationRef) (authz.Member, bool, error) {
	return authz.Member{}, false, nil
}

// Channel is the session key of guild channel id's conversation.
func Channel(id string) string {
	return sessionkey.ForConversation("main", binding.ConversationRef{Channel: "discord", ConversationID: id})
}

// DM is the session key of user's direct messages.
func DM(user string) string {
	return sessionkey.ForConversation("main", binding.ConversationRef{Channel: "discord", ConversationID: sessionkey.DMPrefix + user})
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	p     Pair
	clock *clock.Fake
	svc   *transcript.Service
	ix    *memory.Indexer
	rc    *memory.Recall
	msg   int
}

var dir = Directory{"general": {"alice", "bob"}, "secret": {"bob"}, "t1": {"alice"}}

// owners is a fake session registry: whose each subagent and job run is.
type owners map[string]memory.Owner

func (o owners) Owners(_ context.Context, keys []string) (map[string]memory.Owner, error) {
	out := map[string]memory.Owner{}
	for _, k := range keys {
		if v, ok := o[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

var (
	subagentKey = sessionkey.Subagent("main", "s1")
	jobRunKey   = sessionkey.CronRun("main", "j1", "r1")
	orphanKey   = sessionkey.Subagent("main", "s2") // its record is gone
	sessOwners  = owners{
		// carol spawned it from general; it displays in thread t1.
		subagentKey: {User: "carol", Shown: []binding.ConversationRef{{Channel: "discord", ConversationID: "t1", ParentConversationID: "general"}}},
		// alice's job, posting into secret.
		jobRunKey: {User: "alice", Shown: []binding.ConversationRef{{Channel: "discord", ConversationID: "secret"}}},
	}
)

func newFixture(t *testing.T, h *storetest.Harness[Pair], p Pair) *fixture {
	f := &fixture{t: t, ctx: h.Ctx, clock: clock.NewFake(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))}
	f.use(p)
	return f
}

func (f *fixture) use(p Pair) {
	f.p = p
	f.svc = transcript.New(transcript.Options{}, transcript.Deps{Store: p.Store, Clock: f.clock})
	f.ix = memory.NewIndexer(memory.IndexerOptions{Batch: 3}, memory.IndexerDeps{Feed: p.Store, Entries: p.Store, Index: p.Index, Log: zerolog.Nop()})
	f.rc = memory.NewRecall(memory.RecallOptions{}, memory.RecallDeps{Index: p.Index, Entries: p.Store, Viewer: authz.New(authz.Config{}, dir), Owners: sessOwners})
}

// say appends a displayed entry and returns its message id.
func (f *fixture) say(key string, role transcript.Role, text string) string {
	f.t.Helper()
	f.msg++
	f.clock.Advance(time.Minute)
	id := fmt.Sprintf("m%d", f.msg)
	if _, err := f.svc.Append(f.ctx, key, transcript.Entry{Role: role, Author: string(role), Text: text, MessageIDs: []string{id}, Source: transcript.SourceUser}); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// drain applies every queued change.
func (f *fixture) drain() {
	f.t.Helper()
	for range 1000 {
		n, err := f.ix.Step(f.ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	f.t.Fatal("the change queue does not drain")
}

// find searches as user and returns the snippets, in order.
func (f *fixture) find(user, q string) []string {
	f.t.Helper()
	fs, err := f.rc.Search(f.ctx, user, q, 20)
	if err != nil {
		f.t.Fatalf("search %q as %s: %v", q, user, err)
	}
	out := []string{}
	for _, h := range fs {
		out = append(out, h.Snippet)
	}
	return out
}

func (f *fixture) want(user, q string, want ...string) {
	f.t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := f.find(user, q); !slices.Equal(got, want) {
		f.t.Fatalf("%s searching %q found %q, want %q", user, q, got, want)
	}
}

func testFinds(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	f.say(Channel("general"), transcript.RoleUser, "where is the deploy key kept")
	f.say(Channel("general"), transcript.RoleAssistant, "the deploy key is in the vault")
	f.say(Channel("general"), transcript.RoleUser, "thanks")
	f.drain()
	// Equal scores for one word in two equally long texts: newest first.
	f.say(Channel("general"), transcript.RoleUser, "zebra one")
	f.say(Channel("general"), transcript.RoleUser, "zebra two")
	f.drain()
	f.want("alice", "vault", "the deploy key is in the vault")
	f.want("alice", "zebra", "zebra two", "zebra one")
	f.want("alice", "ZEBRA two", "zebra two", "zebra one")
	f.want("alice", "nothing-like-it")
	fs, err := f.rc.Search(f.ctx, "alice", "vault", 5)
	if err != nil || len(fs) != 1 {
		t.Fatalf("search = %v, %v", fs, err)
	}
	if d := fs[0].Doc; d.Role != transcript.RoleAssistant || d.MessageID == "" || d.At.IsZero() || fs[0].Conversation.ConversationID != "general" {
		t.Fatalf("hit = %+v in %+v: want role, message id, time and conversation", d, fs[0].Conversation)
	}
}

func testEdit(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	id := f.say(Channel("general"), transcript.RoleUser, "meet at the harbour")
	f.drain()
	if ok, err := f.svc.Edit(f.ctx, id, "e1", "meet at the station"); err != nil || !ok {
		t.Fatalf("edit = %v, %v", ok, err)
	}
	f.drain()
	f.want("alice", "harbour")
	f.want("alice", "station", "meet at the station")
	// An edit indexed in the same batch as its entry.
	id2 := f.say(Channel("general"), transcript.RoleUser, "lunch at noon")
	if _, err := f.svc.Edit(f.ctx, id2, "e1", "lunch at one"); err != nil {
		t.Fatal(err)
	}
	f.drain()
	f.want("alice", "noon")
	f.want("alice", "lunch", "lunch at one")
}

func testDelete(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	id := f.say(Channel("general"), transcript.RoleUser, "my password is hunter2")
	f.say(Channel("general"), transcript.RoleUser, "another password talk")
	f.drain()
	f.want("alice", "hunter2", "my password is hunter2")
	if _, err := f.svc.Edit(f.ctx, id, "e1", "my password is swordfish"); err != nil {
		t.Fatal(err)
	}
	f.drain()
	if ok, err := f.svc.Delete(f.ctx, id); err != nil || !ok {
		t.Fatalf("delete = %v, %v", ok, err)
	}
	// Found nowhere, before the index caught up (Recall checks the
	// store) and after.
	f.want("alice", "swordfish")
	f.drain()
	f.want("alice", "hunter2")
	f.want("alice", "swordfish")
	f.want("alice", "password", "another password talk")
	// Deleted before ever indexed.
	id2 := f.say(Channel("general"), transcript.RoleUser, "launch code 0000")
	if _, err := f.svc.Delete(f.ctx, id2); err != nil {
		t.Fatal(err)
	}
	f.drain()
	f.want("alice", "launch")
}

func testEraseWindow(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	f.say(Channel("general"), transcript.RoleUser, "the safe combination is 1234")
	f.drain()
	// A crash between the erasure and the deletion record: only Erase ran.
	if err := f.p.Store.Erase(f.ctx, Channel("general"), []uint64{1}); err != nil {
		t.Fatal(err)
	}
	f.want("alice", "combination")
	f.drain()
	f.want("alice", "combination")
	// The erasure's own change removed the document (Recall's check of the
	// store is the second line, not the only one).
	if hs, err := f.p.Index.Search(f.ctx, memory.Query{Text: "combination", Keys: []string{Channel("general")}, Limit: 5}); err != nil || len(hs) != 0 {
		t.Fatalf("index search after the erasure = %+v, %v; want nothing", hs, err)
	}
}

func testReset(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	f.say(Channel("general"), transcript.RoleUser, "otters before")
	if _, err := f.svc.Reset(f.ctx, Channel("general")); err != nil {
		t.Fatal(err)
	}
	f.say(Channel("general"), transcript.RoleUser, "otters after")
	f.drain()
	f.want("alice", "otters", "otters after", "otters before")
}

func testReplay(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	id := f.say(Channel("general"), transcript.RoleUser, "replayed words")
	pending, err := f.p.Store.Pending(f.ctx, 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %v, %v; want the append", pending, err)
	}
	f.drain()
	if _, err := f.svc.Delete(f.ctx, id); err != nil {
		t.Fatal(err)
	}
	f.drain()
	// The append's change applied again after its deletion (a replay, or
	// changes seen out of order): the entry stays unfound.
	ix := memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: replay{pending}, Entries: f.p.Store, Index: f.p.Index, Log: zerolog.Nop()})
	if _, err := ix.Step(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.want("alice", "replayed")
}

// replay is a feed that hands out the same changes every time.
type replay struct{ cs []memory.Change }

func (r replay) Pending(context.Context, int) ([]memory.Change, error) { return r.cs, nil }
func (r replay) Done(context.Context, []uint64) error                  { return nil }

func testRebuild(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	id := f.say(Channel("general"), transcript.RoleUser, "apples and pears")
	f.say(Channel("general"), transcript.RoleAssistant, "pears are fine")
	gone := f.say(Channel("general"), transcript.RoleUser, "pears secret")
	f.say(DM("alice"), transcript.RoleUser, "pears in private")
	if _, err := f.svc.Edit(f.ctx, id, "e1", "apples and plums"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Delete(f.ctx, gone); err != nil {
		t.Fatal(err)
	}
	f.drain()
	followed := f.find("alice", "pears apples plums")
	if built, err := f.p.Index.Built(f.ctx); err != nil || built {
		t.Fatalf("built = %v, %v before any build", built, err)
	}
	n, err := f.ix.Rebuild(f.ctx)
	if err != nil || n != 3 {
		t.Fatalf("rebuild = %d, %v; want 3 documents", n, err)
	}
	if built, err := f.p.Index.Built(f.ctx); err != nil || !built {
		t.Fatalf("built = %v, %v after a build", built, err)
	}
	if got := f.find("alice", "pears apples plums"); !slices.Equal(got, followed) || len(got) != 3 {
		t.Fatalf("after rebuild found %q; following the changes found %q", got, followed)
	}
	st, err := f.p.Index.Stats(f.ctx)
	if err != nil || st.Docs != 3 || st.Bytes <= 0 {
		t.Fatalf("stats = %+v, %v; want 3 documents and a size", st, err)
	}
	if err := f.p.Index.Reset(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.want("alice", "pears")
}

func testView(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	// One length each, so the ranks are equal and the newest comes first.
	f.say(Channel("general"), transcript.RoleUser, "kiwi general")
	f.say(Channel("secret"), transcript.RoleUser, "kiwi secret")
	f.say(DM("alice"), transcript.RoleUser, "kiwi alicedm")
	f.say(DM("bob"), transcript.RoleUser, "kiwi bobdm")
	f.say(Channel("gone"), transcript.RoleUser, "kiwi gonechan")
	f.drain()
	f.want("alice", "kiwi", "kiwi alicedm", "kiwi general")
	f.want("bob", "kiwi", "kiwi bobdm", "kiwi secret", "kiwi general")
	f.want("mallory", "kiwi")
	if _, err := f.rc.Search(f.ctx, "", "kiwi", 5); !authz.IsRefusal(err) {
		t.Fatalf("search with nobody's authority: %v, want a refusal", err)
	}
	// The limit is taken among what the user may view.
	fs, err := f.rc.Search(f.ctx, "alice", "kiwi", 1)
	if err != nil || len(fs) != 1 || fs[0].Snippet != "kiwi alicedm" {
		t.Fatalf("alice's first hit = %+v, %v", fs, err)
	}
}

func testNotIndexed(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	// Not displayed (no message id) in a conversation's session.
	if _, err := f.svc.Append(f.ctx, Channel("general"), transcript.Entry{Role: transcript.RoleSystem, Text: "mango system text", Source: transcript.SourceSnapshot}); err != nil {
		t.Fatal(err)
	}
	f.drain()
	f.want("alice", "mango")
	if n, err := f.ix.Rebuild(f.ctx); err != nil || n != 0 {
		t.Fatalf("rebuild = %d, %v; want no document", n, err)
	}
}

// testOwned: a subagent's and a job run's entries are found by who ran it,
// and the displayed ones by who may view where they were displayed.
func testOwned(t *testing.T, h *storetest.Harness[Pair]) {
	f := newFixture(t, h, h.Open(t))
	add := func(key string, e transcript.Entry) {
		t.Helper()
		f.clock.Advance(time.Minute)
		if _, err := f.svc.Append(f.ctx, key, e); err != nil {
			t.Fatal(err)
		}
	}
	add(subagentKey, transcript.Entry{Role: transcript.RoleUser, Author: "carol", Text: "mango task brief"})
	add(subagentKey, transcript.Entry{Role: transcript.RoleAssistant, Text: "mango thread reply", MessageIDs: []string{"x1"}})
	add(subagentKey, transcript.Entry{Role: transcript.RoleSystem, Text: "mango system note"})
	add(jobRunKey, transcript.Entry{Role: transcript.RoleUser, Author: "scheduler", Text: "papaya prompt", Source: transcript.SourceJobTrigger})
	add(jobRunKey, transcript.Entry{Role: transcript.RoleAssistant, Text: "papaya result", Source: transcript.SourceTurn})
	add(orphanKey, transcript.Entry{Role: transcript.RoleAssistant, Text: "mango orphan", MessageIDs: []string{"x2"}})
	f.drain()
	f.want("carol", "mango", "mango thread reply", "mango task brief")
	f.want("alice", "mango", "mango thread reply") // views the thread, did not spawn it
	f.want("bob", "mango")                         // views the parent channel, not the thread
	f.want("alice", "papaya", "papaya result", "papaya prompt")
	f.want("bob", "papaya") // views where it posts, but nothing of the run itself was displayed
	f.want("mallory", "mango")
	fs, err := f.rc.Search(f.ctx, "alice", "thread reply", 1)
	if err != nil || len(fs) != 1 || fs[0].Conversation.ConversationID != "t1" || fs[0].Doc.Key != subagentKey {
		t.Fatalf("alice's hit = %+v, %v; want the subagent's entry in thread t1", fs, err)
	}
	// The erasure of a displayed entry reaches its document.
	if err := f.p.Store.Erase(f.ctx, subagentKey, []uint64{2}); err != nil {
		t.Fatal(err)
	}
	f.drain()
	f.want("carol", "mango", "mango task brief")
	if n, err := f.ix.Rebuild(f.ctx); err != nil || n != 4 {
		t.Fatalf("rebuild = %d, %v; want 4 documents (task, prompt, result, orphan)", n, err)
	}
	f.want("carol", "mango", "mango task brief")
	f.want("alice", "papaya", "papaya result", "papaya prompt")
}

func testRestart(t *testing.T, h *storetest.Harness[Pair]) {
	if !h.CanReopen() {
		t.Skip("not durable")
	}
	f := newFixture(t, h, h.Open(t))
	f.say(Channel("general"), transcript.RoleUser, "durable papaya")
	f.say(Channel("general"), transcript.RoleUser, "second papaya")
	// One batch of several applied, then the process dies.
	ix := memory.NewIndexer(memory.IndexerOptions{Batch: 1}, memory.IndexerDeps{Feed: f.p.Store, Entries: f.p.Store, Index: f.p.Index, Log: zerolog.Nop()})
	if _, err := ix.Step(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.use(h.Reopen(t, f.p))
	f.want("alice", "papaya", "durable papaya")
	f.drain()
	f.want("alice", "papaya", "second papaya", "durable papaya")
}

// Drainer applies every queued change of a pair to its index.
type Drainer struct{ ix *memory.Indexer }

// NewDrainer returns a Drainer for p.
func NewDrainer(p Pair) Drainer {
	return Drainer{memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: p.Store, Entries: p.Store, Index: p.Index, Log: zerolog.Nop()})}
}

// Drain applies changes until the queue is empty.
func (d Drainer) Drain(t *testing.T) {
	t.Helper()
	for range 1000 {
		n, err := d.ix.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the change queue does not drain")
}
