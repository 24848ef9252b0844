// Package usagetest is the usage.Store conformance suite: one set of cases
// run against store/memory, store/bolt and store/postgres.
package usagetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/internal/storetest"
)

// Option configures Run.
type Option = storetest.Option[usage.Store]

type harness = storetest.Harness[usage.Store]

// WithReopen supplies a hook that closes s and returns a store over the
// same persisted data. Without it, the durability case is skipped.
func WithReopen(fn func(t *testing.T, s usage.Store) usage.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the suite. open must return a new, empty store for each call
// and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) usage.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[usage.Store]{
		{Name: "Empty", Fn: testEmpty},
		{Name: "AddAndFilter", Fn: testAddAndFilter},
		{Name: "SameInstant", Fn: testSameInstant},
		{Name: "Batch", Fn: testBatch},
		{Name: "Prune", Fn: testPrune},
		{Name: "Concurrent", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2026, 6, 7, 8, 9, 10, 111222000, time.UTC)

func rec(i int, user, place string) usage.Record {
	return usage.Record{At: t0.Add(time.Duration(i) * time.Minute), Model: "default", Agent: "main", User: user, Place: place,
		Conversation: "c" + place, SessionKey: "agent:main:discord:channel:c" + place, Run: fmt.Sprintf("turn:%d", i),
		Input: int64(100 + i), Output: int64(10 + i), Cached: int64(i), Cost: float64(i) / 100}
}

func list(t *testing.T, h *harness, s usage.Store, f usage.Filter) []usage.Record {
	t.Helper()
	rs, err := s.Usage(h.Ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func add(t *testing.T, h *harness, s usage.Store, rs ...usage.Record) {
	t.Helper()
	for _, r := range rs {
		if err := s.AddUsage(h.Ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}

func testEmpty(t *testing.T, h *harness) {
	s := h.Open(t)
	if rs := list(t, h, s, usage.Filter{}); len(rs) != 0 {
		t.Fatalf("new store lists %v", rs)
	}
	if n, err := s.PruneUsage(h.Ctx, t0); err != nil || n != 0 {
		t.Fatalf("prune of an empty store: %d %v", n, err)
	}
}

func testAddAndFilter(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b, c, d := rec(3, "u1", "g1"), rec(1, "u2", "g1"), rec(2, "u1", ""), rec(4, "u1", "g2")
	add(t, h, s, a, b, c, d) // not in time order
	tests := []struct {
		name string
		f    usage.Filter
		want []usage.Record
	}{
		{"all, oldest first", usage.Filter{}, []usage.Record{b, c, a, d}},
		{"since (inclusive)", usage.Filter{Since: c.At}, []usage.Record{c, a, d}},
		{"user", usage.Filter{User: "u1"}, []usage.Record{c, a, d}},
		{"place", usage.Filter{Place: "g1"}, []usage.Record{b, a}},
		{"user and place since", usage.Filter{User: "u1", Place: "g1", Since: b.At}, []usage.Record{a}},
		{"nobody", usage.Filter{User: "u9"}, nil},
	}
	for _, tt := range tests {
		got := list(t, h, s, tt.f)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", tt.name, got, tt.want)
		}
	}
}

// Two calls in the same nanosecond are two records.
func testSameInstant(t *testing.T, h *harness) {
	s := h.Open(t)
	a, b := rec(1, "u1", "g1"), rec(1, "u1", "g1")
	b.Run = "turn:other"
	add(t, h, s, a, b)
	if got := list(t, h, s, usage.Filter{}); len(got) != 2 {
		t.Fatalf("got %d records, want 2", len(got))
	}
}

// One AddUsage call stores several records (a turn's calls, one write).
func testBatch(t *testing.T, h *harness) {
	s := h.Open(t)
	rs := []usage.Record{rec(2, "u1", "g1"), rec(1, "u2", "g1"), rec(3, "u1", "")}
	if err := s.AddUsage(h.Ctx, rs...); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage(h.Ctx); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
	if got, want := list(t, h, s, usage.Filter{}), []usage.Record{rs[1], rs[0], rs[2]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

func testPrune(t *testing.T, h *harness) {
	s := h.Open(t)
	rs := []usage.Record{rec(1, "u", "g"), rec(2, "u", "g"), rec(3, "u", "g")}
	add(t, h, s, rs...)
	n, err := s.PruneUsage(h.Ctx, rs[2].At)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if got := list(t, h, s, usage.Filter{}); !reflect.DeepEqual(got, rs[2:]) {
		t.Fatalf("after prune %+v", got)
	}
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Go(func() { errs <- s.AddUsage(h.Ctx, rec(i%5, fmt.Sprint("u", i%3), "g")) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := usage.Sum(list(t, h, s, usage.Filter{})); got.Calls != 40 {
		t.Fatalf("%d records after 40 concurrent adds", got.Calls)
	}
}

func testDurable(t *testing.T, h *harness) {
	if !h.CanReopen() {
		t.Skip("store has no persistence")
	}
	s := h.Open(t)
	r := rec(1, "u1", "g1")
	add(t, h, s, r)
	s = h.Reopen(t, s)
	if got := list(t, h, s, usage.Filter{}); !reflect.DeepEqual(got, []usage.Record{r}) {
		t.Fatalf("after reopen %+v", got)
	}
}
