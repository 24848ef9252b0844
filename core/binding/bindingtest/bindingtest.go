package bindingtest

import (
	"fmt"
	"github.com/agentbot/agentbot/internal/storetest"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
)

// Option configures Run.
type Option = storetest.Option[binding.Store]

type harness = storetest.Harness[binding.Store]

// WithReopen supplies a hook that closes s and returns a store over the same
// persisted data. Without it, durability tests are skipped.
func WithReopen(fn func(t *testing.T, s binding.Store) binding.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the binding.Store conformance suite. open must return a new,
// empty store for each call and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) binding.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[binding.Store]{
		{Name: "Empty", Fn: testEmpty},
		{Name: "PutAndList", Fn: testPutAndList},
		{Name: "ReplaceByID", Fn: testReplace},
		{Name: "Atomic", Fn: testAtomic},
		{Name: "RoundTrip", Fn: testRoundTrip},
		{Name: "CopySemantics", Fn: testCopies},
		{Name: "Concurrent", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2025, 6, 7, 8, 9, 10, 111222333, time.UTC)

func rec(id string) binding.Record {
	return binding.Record{
		ID:               id,
		TargetSessionKey: "agent:main:subagent:" + id,
		TargetKind:       binding.KindSubagent,
		Conversation: binding.ConversationRef{
			Channel: "discord", AccountID: "default",
			ConversationID: "thread-" + id, ParentConversationID: "chan-1",
		},
		Status:         binding.StatusActive,
		AgentID:        "main",
		Label:          "worker " + id,
		BoundBy:        "user-1",
		BoundAt:        t0,
		LastActivityAt: t0.Add(time.Minute),
		IdleTimeout:    time.Hour,
		MaxAge:         24 * time.Hour,
	}
}

func norm(r binding.Record) binding.Record {
	r.BoundAt = r.BoundAt.UTC().Round(0)
	r.LastActivityAt = r.LastActivityAt.UTC().Round(0)
	r.EndedAt = r.EndedAt.UTC().Round(0)
	return r
}

func list(t *testing.T, h *harness, s binding.Store) map[string]binding.Record {
	t.Helper()
	rs, err := s.Bindings(h.Ctx)
	if err != nil {
		t.Fatalf("Bindings: %v", err)
	}
	out := make(map[string]binding.Record, len(rs))
	for _, r := range rs {
		if _, dup := out[r.ID]; dup {
			t.Fatalf("Bindings returned %q twice", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

func mustMatch(t *testing.T, got map[string]binding.Record, want ...binding.Record) {
	t.Helper()
	if len(got) != len(want) {
		ids := make([]string, 0, len(got))
		for id := range got {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Fatalf("got %d records %q, want %d", len(got), ids, len(want))
	}
	for _, w := range want {
		g, ok := got[w.ID]
		if !ok {
			t.Fatalf("record %q missing", w.ID)
		}
		if !reflect.DeepEqual(norm(g), norm(w)) {
			t.Fatalf("record %q:\n got  %#v\n want %#v", w.ID, g, w)
		}
	}
}

func put(t *testing.T, h *harness, s binding.Store, recs ...binding.Record) {
	t.Helper()
	if err := s.PutBindings(h.Ctx, recs...); err != nil {
		t.Fatalf("PutBindings: %v", err)
	}
}

func testEmpty(t *testing.T, h *harness) {
	s := h.Open(t)
	mustMatch(t, list(t, h, s))
	put(t, h, s) // no records: no-op
	mustMatch(t, list(t, h, s))
}

func testPutAndList(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b, c := rec("a"), rec("b"), rec("c")
	c.Status = binding.StatusEnded
	c.EndedAt = t0.Add(time.Hour)
	c.EndedReason = binding.ReasonThreadDelete
	put(t, h, s, a)
	put(t, h, s, b, c)
	mustMatch(t, list(t, h, s), a, b, c)
}

func testReplace(t *testing.T, h *harness) {
	cases := []struct {
		name   string
		mutate func(r *binding.Record)
	}{
		{"status ended", func(r *binding.Record) {
			r.Status = binding.StatusEnded
			r.EndedAt = t0.Add(2 * time.Hour)
			r.EndedReason = binding.ReasonIdleExpired
		}},
		{"touch", func(r *binding.Record) { r.LastActivityAt = t0.Add(3 * time.Hour) }},
		{"retarget", func(r *binding.Record) {
			r.TargetSessionKey = "agent:main:session:new"
			r.TargetKind = binding.KindSession
			r.Metadata = map[string]string{"k": "v"}
		}},
		{"clear optional fields", func(r *binding.Record) {
			r.Label, r.AgentID, r.IdleTimeout, r.MaxAge = "", "", 0, 0
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := h.Open(t)
			orig, other := rec("x"), rec("y")
			put(t, h, s, orig, other)
			upd := orig
			tc.mutate(&upd)
			put(t, h, s, upd)
			mustMatch(t, list(t, h, s), upd, other)
			// Same id twice in one call: the last one wins.
			last := upd
			last.Label = "last"
			put(t, h, s, upd, last)
			mustMatch(t, list(t, h, s), last, other)
		})
	}
}

func testAtomic(t *testing.T, h *harness) {
	s := h.Open(t)
	a := rec("a")
	put(t, h, s, a)
	a2 := a
	a2.Status = binding.StatusEnded
	if err := s.PutBindings(h.Ctx, a2, rec("new"), binding.Record{ID: ""}); err == nil {
		t.Fatal("PutBindings with an empty id: no error")
	}
	mustMatch(t, list(t, h, s), a)
}

func testRoundTrip(t *testing.T, h *harness) {
	s := h.Open(t)
	zone := time.FixedZone("Y", -(3*3600 + 1800))
	full := rec("full")
	full.BoundAt = time.Date(2024, 2, 29, 12, 0, 0, 1, zone)
	full.LastActivityAt = time.Now() // monotonic reading
	full.EndedAt = time.Date(2030, 1, 1, 0, 0, 0, 999999999, zone)
	full.Status = binding.StatusEnding
	full.EndedReason = "custom-reason"
	full.Metadata = map[string]string{"webhookId": "w1", "ünï": "✓"}
	full.IdleTimeout = 1500 * time.Millisecond
	minimal := binding.Record{ID: "min"}
	emptyMeta := rec("emptymeta")
	emptyMeta.Metadata = map[string]string{}
	put(t, h, s, full, minimal, emptyMeta)
	got := list(t, h, s)
	wantEmpty := emptyMeta
	wantEmpty.Metadata = nil
	mustMatch(t, got, full, minimal, wantEmpty)
	if !got["min"].EndedAt.IsZero() || !got["min"].BoundAt.IsZero() {
		t.Fatalf("zero times came back as %v / %v", got["min"].BoundAt, got["min"].EndedAt)
	}
	if !got["full"].BoundAt.Equal(full.BoundAt) || !got["full"].EndedAt.Equal(full.EndedAt) ||
		!got["full"].LastActivityAt.Equal(full.LastActivityAt) {
		t.Fatalf("times not Equal after round trip: %+v", got["full"])
	}
	if got["emptymeta"].Metadata != nil {
		t.Fatalf("empty Metadata came back as %#v, want nil", got["emptymeta"].Metadata)
	}
}

func testCopies(t *testing.T, h *harness) {
	s := h.Open(t)
	in := rec("a")
	in.Metadata = map[string]string{"k": "v"}
	put(t, h, s, in)
	in.Metadata["k"] = "mutated-in"
	got, err := s.Bindings(h.Ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("Bindings: %v %v", got, err)
	}
	got[0].Metadata["k"] = "mutated-out"
	want := rec("a")
	want.Metadata = map[string]string{"k": "v"}
	mustMatch(t, list(t, h, s), want)
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	const goroutines, per = 8, 25
	var wg sync.WaitGroup
	var want []binding.Record
	for g := range goroutines {
		for i := range per {
			want = append(want, rec(fmt.Sprintf("g%d-%d", g, i)))
		}
	}
	for g := range goroutines {
		wg.Go(func() {
			for i := range per {
				if err := s.PutBindings(h.Ctx, want[g*per+i]); err != nil {
					t.Errorf("PutBindings: %v", err)
				}
			}
		})
	}
	wg.Wait()
	mustMatch(t, list(t, h, s), want...)
}

func testDurable(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b := rec("a"), rec("b")
	b.Status = binding.StatusEnded
	b.EndedAt = t0
	b.EndedReason = binding.ReasonManual
	b.Metadata = map[string]string{"x": "y"}
	put(t, h, s, a, b)
	s = h.Reopen(t, s)
	mustMatch(t, list(t, h, s), a, b)
	a.Status = binding.StatusEnding
	put(t, h, s, a)
	s = h.Reopen(t, s)
	mustMatch(t, list(t, h, s), a, b)
}
