// Package procstest is the procs.Store conformance suite: one set of cases
// run against store/memory, store/bolt and store/postgres.
package procstest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/internal/storetest"
)

// Option configures Run.
type Option = storetest.Option[procs.Store]

type harness = storetest.Harness[procs.Store]

// WithReopen supplies a hook that closes s and returns a store over the
// same persisted data. Without it, the durability case is skipped.
func WithReopen(fn func(t *testing.T, s procs.Store) procs.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the suite. open must return a new, empty store for each call
// and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) procs.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[procs.Store]{
		{Name: "Empty", Fn: testEmpty},
		{Name: "RecordListRemove", Fn: testRecordListRemove},
		{Name: "ReplaceByKey", Fn: testReplace},
		{Name: "Concurrent", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2025, 6, 7, 8, 9, 10, 111222000, time.UTC)

func rec(host string, pgid int) procs.Record {
	return procs.Record{Host: host, BootID: "boot-1", PGID: pgid, PID: pgid, StartTime: uint64(1000 + pgid), Kind: procs.KindMCP,
		Name: fmt.Sprintf("server-%d", pgid), OwnerPID: 42, OwnerStart: 7, StartedAt: t0}
}

func list(t *testing.T, h *harness, s procs.Store) []procs.Record {
	t.Helper()
	rs, err := s.Processes(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func testEmpty(t *testing.T, h *harness) {
	s := h.Open(t)
	if rs := list(t, h, s); len(rs) != 0 {
		t.Fatalf("new store lists %v", rs)
	}
	if err := s.RemoveProcess(h.Ctx, "nobody/1"); err != nil {
		t.Errorf("removing an unknown key: %v", err)
	}
}

func testRecordListRemove(t *testing.T, h *harness) {
	s := h.Open(t)
	in := []procs.Record{rec("b", 20), rec("a", 300), rec("a", 21)}
	in[1].Kind, in[1].Name = procs.KindACP, "gemini"
	for _, r := range in {
		if err := s.RecordProcess(h.Ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got := list(t, h, s)
	want := []procs.Record{in[2], in[1], in[0]} // by key: a/21, a/300, b/20
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed\n%+v\nwant\n%+v", got, want)
	}
	if err := s.RemoveProcess(h.Ctx, in[1].Key()); err != nil {
		t.Fatal(err)
	}
	if got := list(t, h, s); !reflect.DeepEqual(got, []procs.Record{in[2], in[0]}) {
		t.Fatalf("after remove: %+v", got)
	}
}

func testReplace(t *testing.T, h *harness) {
	s := h.Open(t)
	r := rec("a", 5)
	if err := s.RecordProcess(h.Ctx, r); err != nil {
		t.Fatal(err)
	}
	r.StartTime, r.OwnerPID, r.Name = 99, 43, "again"
	if err := s.RecordProcess(h.Ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := list(t, h, s); !reflect.DeepEqual(got, []procs.Record{r}) {
		t.Fatalf("after replace: %+v", got)
	}
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			r := rec("c", 100+i)
			if err := s.RecordProcess(h.Ctx, r); err != nil {
				errs <- err
			}
			if i%2 == 0 {
				if err := s.RemoveProcess(h.Ctx, r.Key()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := list(t, h, s); len(got) != 10 {
		t.Fatalf("%d records, want 10", len(got))
	}
}

func testDurable(t *testing.T, h *harness) {
	s := h.Open(t)
	r := rec("d", 77)
	if err := s.RecordProcess(h.Ctx, r); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	if got := list(t, h, s); !reflect.DeepEqual(got, []procs.Record{r}) {
		t.Fatalf("after reopen: %+v", got)
	}
}
