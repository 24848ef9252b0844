package memory_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/memory/memorytest"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	storemem "github.com/agentbot/agentbot/store/memory"
)

// index is a strict in-memory Index: every word of a document is a term;
// a query matches documents holding any of its words.
type index struct {
	docs  map[string]memory.Doc
	built bool
}

func (x *index) Apply(_ context.Context, ups []memory.Update) error {
	for _, u := range ups {
		if u.Delete {
			delete(x.docs, u.Doc.ID())
		} else {
			x.docs[u.Doc.ID()] = u.Doc
		}
	}
	return nil
}

func (x *index) Search(_ context.Context, q memory.Query) ([]memory.Hit, error) {
	var out []memory.Hit
	for _, d := range x.docs {
		if !slices.Contains(q.Keys, d.Key) {
			continue
		}
		n := 0
		for _, w := range strings.Fields(strings.ToLower(q.Text)) {
			if slices.Contains(strings.Fields(strings.ToLower(d.Text)), w) {
				n++
			}
		}
		if n > 0 {
			out = append(out, memory.Hit{Doc: d, Score: float64(n)})
		}
	}
	slices.SortFunc(out, func(a, b memory.Hit) int {
		if a.Score != b.Score {
			return int(b.Score - a.Score)
		}
		return b.Doc.At.Compare(a.Doc.At)
	})
	return out[:min(len(out), q.Limit)], nil
}

func (x *index) Built(context.Context) (bool, error) { return x.built, nil }
func (x *index) SetBuilt(context.Context) error      { x.built = true; return nil }
func (x *index) Reset(context.Context) error {
	x.docs, x.built = map[string]memory.Doc{}, false
	return nil
}
func (x *index) Stats(context.Context) (memory.Stats, error) {
	return memory.Stats{Docs: uint64(len(x.docs))}, nil
}

type nextTools struct{}

func (nextTools) Tools(context.Context, string, authz.Actor) []model.Tool {
	return []model.Tool{{Name: "files__read"}}
}
func (nextTools) Call(_ context.Context, _ string, _ authz.Actor, c model.ToolCall) (string, error) {
	return "next ran " + c.Name, nil
}

// TestRecallTool: the tool is offered and runs only while memory is on,
// and finds only what the acting user may view (invariant 13): alice her
// own DM and the channel she sees, never bob's DM or bob's channel.
func TestRecallTool(t *testing.T) {
	ctx := t.Context()
	st := storemem.New()
	idx := &index{docs: map[string]memory.Doc{}}
	svc := transcript.New(transcript.Options{}, transcript.Deps{Store: st})
	for i, e := range []struct{ key, text string }{
		{memorytest.Channel("general"), "the quarterly report is due friday"},
		{memorytest.Channel("secret"), "the quarterly report numbers are bad"},
		{memorytest.DM("alice"), "remind me about the quarterly report"},
		{memorytest.DM("bob"), "my quarterly report password is tiger"},
	} {
		if _, err := svc.Append(ctx, e.key, transcript.Entry{Role: transcript.RoleUser, Text: e.text, MessageIDs: []string{string(rune('a' + i))}}); err != nil {
			t.Fatal(err)
		}
	}
	ix := memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: zerolog.Nop()})
	if _, err := ix.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var on atomic.Bool
	tools := memory.Tools{
		Recall: memory.NewRecall(memory.RecallOptions{}, memory.RecallDeps{Index: idx, Entries: st, Viewer: authz.New(authz.Config{}, memorytest.Directory{"general": {"alice", "bob"}, "secret": {"bob"}})}),
		On:     on.Load, Next: nextTools{},
	}
	alice := authz.Actor{UserID: "alice"}
	call := model.ToolCall{Name: memory.ToolRecall, Arguments: `{"query": "quarterly report"}`}

	if got := tools.Tools(ctx, "main", alice); len(got) != 1 || got[0].Name != "files__read" {
		t.Fatalf("memory off: offered %v, want only the next toolbox's", got)
	}
	if _, err := tools.Call(ctx, "main", alice, call); !authz.IsRefusal(err) {
		t.Fatalf("memory off: recall = %v, want a refusal", err)
	}
	on.Store(true)
	if got := tools.Tools(ctx, "main", alice); len(got) != 2 || got[0].Name != memory.ToolRecall {
		t.Fatalf("memory on: offered %v", got)
	}
	out, err := tools.Call(ctx, "main", alice, call)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"user:alice", "remind me about the quarterly report", "channel:general", "due friday", "(message "} {
		if !strings.Contains(out, want) {
			t.Errorf("alice's recall lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"tiger", "numbers are bad", "user:bob", "channel:secret"} {
		if strings.Contains(out, never) {
			t.Errorf("alice's recall shows %q, which she cannot view:\n%s", never, out)
		}
	}
	if out, err := tools.Call(ctx, "main", alice, model.ToolCall{Name: "files__read"}); err != nil || out != "next ran files__read" {
		t.Fatalf("next tool = %q, %v", out, err)
	}
	// SearchIn: one conversation, if the user may view it; SearchAll: the
	// console's, every conversation.
	rc := tools.Recall
	for _, tc := range []struct {
		name string
		find func() ([]memory.Found, error)
		n    int
	}{
		{"alice in general", func() ([]memory.Found, error) {
			return rc.SearchIn(ctx, "alice", binding.ConversationRef{Channel: "discord", ConversationID: "general"}, "quarterly", 10)
		}, 1},
		{"alice in secret", func() ([]memory.Found, error) {
			return rc.SearchIn(ctx, "alice", binding.ConversationRef{Channel: "discord", ConversationID: "secret"}, "quarterly", 10)
		}, 0},
		{"all", func() ([]memory.Found, error) { return rc.SearchAll(ctx, "quarterly", 10) }, 4},
	} {
		if fs, err := tc.find(); err != nil || len(fs) != tc.n {
			t.Errorf("%s: %d hits, %v; want %d", tc.name, len(fs), err, tc.n)
		}
	}
	for _, bad := range []string{`{"query": ""}`, `{"query": 3}`, `not json`, `{"query": "` + strings.Repeat("x", 600) + `"}`} {
		if _, err := tools.Call(ctx, "main", alice, model.ToolCall{Name: memory.ToolRecall, Arguments: bad}); err == nil {
			t.Errorf("recall %s: no error", bad)
		}
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("a ", 100) + "needle " + strings.Repeat("b ", 100)
	for _, tc := range []struct{ text, q, want string }{
		{"short text", "x", "short text"},
		{"  spaced \n\n text ", "x", "spaced text"},
		{long, "NEEDLE", "…" + strings.Repeat("a ", 33) + "needle" + strings.Repeat(" b", 64) + "…"},
	} {
		got := memory.Snippet(tc.text, tc.q, 200)
		if got != tc.want {
			t.Errorf("Snippet(%.20q, %q) = %q, want %q", tc.text, tc.q, got, tc.want)
		}
		if len(got) > 200+len("……") {
			t.Errorf("snippet too long: %d", len(got))
		}
	}
}

// TestIndexerWithoutIndexDrains: with memory off the indexer keeps no
// index and empties the store's change queue, so it does not grow.
func TestIndexerWithoutIndexDrains(t *testing.T) {
	ctx := t.Context()
	st := storemem.New()
	svc := transcript.New(transcript.Options{}, transcript.Deps{Store: st})
	for i := range 5 {
		if _, err := svc.Append(ctx, memorytest.Channel("general"), transcript.Entry{Role: transcript.RoleUser, Text: "x", MessageIDs: []string{string(rune('a' + i))}}); err != nil {
			t.Fatal(err)
		}
	}
	ix := memory.NewIndexer(memory.IndexerOptions{Batch: 2}, memory.IndexerDeps{Feed: st, Entries: st, Log: zerolog.Nop()})
	for _, want := range []int{2, 2, 1, 0} {
		if n, err := ix.Step(ctx); err != nil || n != want {
			t.Fatalf("step = %d, %v; want %d", n, err, want)
		}
	}
	if n, err := ix.Rebuild(ctx); err != nil || n != 0 {
		t.Fatalf("rebuild without an index = %d, %v", n, err)
	}
}

// countingViewer lets alice view "general" only, and counts the checks.
type countingViewer struct {
	allow  map[string]bool
	checks int
}

func (v *countingViewer) CanView(_ context.Context, userID string, conv binding.ConversationRef) error {
	v.checks++
	if v.allow[userID+"/"+conv.ConversationID] {
		return nil
	}
	return &authz.Refusal{Msg: "no"}
}

// TestRecallReusesRefusalsOnly: a refused view check is reused for a
// while (a deleted channel costs the platform one lookup a minute, not one
// per search); a granted one never is (a revoked view hides at once).
func TestRecallReusesRefusalsOnly(t *testing.T) {
	ctx := t.Context()
	st := storemem.New()
	svc := transcript.New(transcript.Options{}, transcript.Deps{Store: st})
	for i, key := range []string{memorytest.Channel("general"), memorytest.Channel("gone1"), memorytest.Channel("gone2")} {
		if _, err := svc.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Text: "x", MessageIDs: []string{string(rune('a' + i))}}); err != nil {
			t.Fatal(err)
		}
	}
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	v := &countingViewer{allow: map[string]bool{"alice/general": true}}
	rc := memory.NewRecall(memory.RecallOptions{}, memory.RecallDeps{Index: &index{docs: map[string]memory.Doc{}}, Entries: st, Viewer: v, Clock: fake})
	visible := func() []string {
		keys, err := rc.Visible(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	for _, step := range []struct {
		advance time.Duration
		revoke  bool
		keys    int
		checks  int
	}{
		{keys: 1, checks: 3},                            // every conversation checked
		{advance: 30 * time.Second, keys: 1, checks: 1}, // the refusals reused, the grant checked again
		{revoke: true, keys: 0, checks: 1},              // a revoked view hides at once
		{advance: 31 * time.Second, keys: 0, checks: 2}, // the old refusals expired; general's is fresh
	} {
		fake.Advance(step.advance)
		if step.revoke {
			v.allow = map[string]bool{}
		}
		v.checks = 0
		if keys := visible(); len(keys) != step.keys || v.checks != step.checks {
			t.Fatalf("after %v: %d visible, %d checks; want %d, %d", step.advance, len(keys), v.checks, step.keys, step.checks)
		}
	}
}
