package transcripttest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
)

// The conformance checks of what a store keeps: entries round-trip whole and as copies, under concurrency,
// across a reopen, and by message id.

func testRoundTrip(t *testing.T, h *harness) {
	s := h.Open(t)
	full := transcript.Entry{
		Role:       transcript.RoleAssistant,
		Author:     "bot",
		Text:       "line one\nline two — ünïcødé ✓ \x00 \"quoted\"",
		MessageIDs: []string{"1300000000000000001", "1300000000000000002"},
		Source:     transcript.SourceMessageTool,
		DeliveryID: "dlv-xyz",
		Generation: 4,
		At:         t0,
		Meta:       map[string]string{"jobId": "j1", "subagent": "agent:main:subagent:abc"},
	}
	minimal := transcript.Entry{Role: transcript.RoleUser, Text: "", MessageIDs: []string{}}
	for _, in := range []transcript.Entry{full, minimal} {
		got := mustAppend(t, s, "k", in)
		want := in
		want.Seq = got.Seq
		want.SessionKey = "k"
		mustEqual(t, "append result", got, want)
		tail := mustTail(t, s, "k", 1)
		mustEqual(t, "tail", tail[0], want)
		rng, err := s.Range(h.Ctx, "k", got.Seq, 1)
		if err != nil || len(rng) != 1 {
			t.Fatalf("Range: %v %v", rng, err)
		}
		mustEqual(t, "range", rng[0], want)
		for _, id := range in.MessageIDs {
			bm, ok, err := s.ByMessageID(h.Ctx, "k", id)
			if err != nil || !ok {
				t.Fatalf("ByMessageID(%s): ok=%v err=%v", id, ok, err)
			}
			mustEqual(t, "by message id", bm, want)
		}
	}
	// Empty Meta comes back nil.
	e := entry(9)
	e.Meta = map[string]string{}
	if got := mustAppend(t, s, "k", e); got.Meta != nil {
		t.Fatalf("empty Meta returned as %#v, want nil", got.Meta)
	}
}

func testTime(t *testing.T, h *harness) {
	s := h.Open(t)
	zone := time.FixedZone("X", 5*3600+1800)
	times := []time.Time{
		time.Date(2024, 12, 31, 23, 59, 59, 999999999, zone),
		time.Now(), // carries a monotonic reading
		time.Time{},
		time.Date(1999, 1, 1, 0, 0, 0, 1, time.UTC),
	}
	for i, at := range times {
		e := entry(i)
		e.At = at
		got := mustAppend(t, s, "k", e)
		if !got.At.Equal(at) {
			t.Fatalf("Append At = %v, want %v", got.At, at)
		}
	}
	for i, e := range mustTail(t, s, "k", 10) {
		if !e.At.Equal(times[i]) {
			t.Fatalf("Tail[%d].At = %v, want %v", i, e.At, times[i])
		}
		if times[i].IsZero() && !e.At.IsZero() {
			t.Fatalf("zero time came back as %v", e.At)
		}
	}
}

func testCopies(t *testing.T, h *harness) {
	s := h.Open(t)
	in := entry(1)
	in.Meta = map[string]string{"a": "1"}
	got := mustAppend(t, s, "k", in)
	want := got
	want.MessageIDs = slices.Clone(got.MessageIDs)
	want.Meta = map[string]string{"a": "1"}
	in.MessageIDs[0] = "mutated-in"
	in.Meta["a"] = "mutated-in"
	got.MessageIDs[0] = "mutated-out"
	got.Meta["a"] = "mutated-out"
	tail := mustTail(t, s, "k", 1)
	mustEqual(t, "after mutating input and output", tail[0], want)
	tail[0].MessageIDs[0] = "mutated-tail"
	tail[0].Meta["b"] = "x"
	again := mustTail(t, s, "k", 1)
	mustEqual(t, "after mutating Tail result", again[0], want)
	if _, ok, _ := s.ByMessageID(h.Ctx, "k", "mutated-in"); ok {
		t.Fatal("mutated input message id became indexed")
	}
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	const goroutines, perG = 16, 50
	keys := []string{"c0", "c1"}
	type result struct {
		key, id string
		seq     uint64
		existed bool
	}
	results := make([][]result, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			key := keys[g%2]
			for i := range perG {
				// Goroutines g and g+2 (same session, same group g/4)
				// race on the same delivery ids.
				e := entry(i)
				e.DeliveryID = fmt.Sprintf("d-%d-%d", g/4, i)
				e.Text = e.DeliveryID
				got, existed, err := s.Append(h.Ctx, key, e)
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				results[g] = append(results[g], result{key, e.DeliveryID, got.Seq, existed})
				if got.DeliveryID != e.DeliveryID || got.Text != e.Text {
					t.Errorf("Append returned %+v for delivery %s", got, e.DeliveryID)
				}
			}
			// One entry without delivery id per goroutine: never deduped.
			if _, existed, err := s.Append(h.Ctx, key, entry(-1)); err != nil || existed {
				t.Errorf("Append without delivery id: existed=%v err=%v", existed, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	perKey := goroutines / len(keys) * perG / 2 // unique ids per session
	for _, key := range keys {
		es := mustTail(t, s, key, 100000)
		wantN := perKey + goroutines/len(keys)
		if got, want := seqs(es), seqRange(1, uint64(wantN)); !slices.Equal(got, want) {
			t.Fatalf("session %s: seqs not dense 1..%d: got %d entries %v", key, wantN, len(es), got)
		}
		seen := map[string]uint64{}
		for _, e := range es {
			if e.DeliveryID == "" {
				continue
			}
			if prev, dup := seen[e.DeliveryID]; dup {
				t.Fatalf("session %s: delivery %s stored twice (seq %d and %d)", key, e.DeliveryID, prev, e.Seq)
			}
			seen[e.DeliveryID] = e.Seq
		}
		if len(seen) != perKey {
			t.Fatalf("session %s: %d delivery ids stored, want %d", key, len(seen), perKey)
		}
		existed := 0
		for _, rs := range results {
			for _, r := range rs {
				if r.key != key {
					continue
				}
				if r.existed {
					existed++
				}
				if seen[r.id] != r.seq {
					t.Fatalf("session %s: delivery %s returned seq %d, stored at %d", key, r.id, r.seq, seen[r.id])
				}
			}
		}
		if existed != perKey {
			t.Fatalf("session %s: %d appends reported existed, want %d", key, existed, perKey)
		}
	}
}

func testDurable(t *testing.T, h *harness) {
	s := h.Open(t)
	var stored []transcript.Entry
	for i := 1; i <= 5; i++ {
		e := entry(i)
		e.DeliveryID = fmt.Sprintf("d%d", i)
		e.MessageIDs = []string{fmt.Sprintf("m%d", i), fmt.Sprintf("m%d-b", i)}
		e.Meta = map[string]string{"i": fmt.Sprint(i)}
		stored = append(stored, mustAppend(t, s, "k", e))
	}
	mustAppend(t, s, "k2", entry(1))
	if err := s.SetGeneration(h.Ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)

	tail := mustTail(t, s, "k", 10)
	if len(tail) != len(stored) {
		t.Fatalf("after reopen: %d entries, want %d", len(tail), len(stored))
	}
	for i := range tail {
		mustEqual(t, "after reopen", tail[i], stored[i])
	}
	if g, err := s.Generation(h.Ctx, "k"); err != nil || g != 2 {
		t.Fatalf("generation after reopen = %d, %v; want 2", g, err)
	}
	keys, err := s.Sessions(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"k", "k2"}) {
		t.Fatalf("sessions after reopen = %q", keys)
	}
	got, ok, err := s.ByMessageID(h.Ctx, "k", "m3-b")
	if err != nil || !ok {
		t.Fatalf("ByMessageID after reopen: ok=%v err=%v", ok, err)
	}
	mustEqual(t, "ByMessageID after reopen", got, stored[2])
	dup := entry(100)
	dup.DeliveryID = "d4"
	got, existed, err := s.Append(h.Ctx, "k", dup)
	if err != nil || !existed {
		t.Fatalf("dedupe after reopen: existed=%v err=%v", existed, err)
	}
	mustEqual(t, "dedupe after reopen", got, stored[3])
	if next := mustAppend(t, s, "k", entry(6)); next.Seq != 6 {
		t.Fatalf("seq after reopen = %d, want 6", next.Seq)
	}
}

func testLocateMessage(t *testing.T, h *harness) {
	s := h.Open(t)
	e := entry(1)
	e.MessageIDs = []string{"p1", "p2"}
	mustAppend(t, s, "a", e)
	mustAppend(t, s, "b", entry(2))
	for _, c := range []struct {
		id, key string
		ok      bool
	}{{"p1", "a", true}, {"p2", "a", true}, {"m2", "b", true}, {"m9", "", false}, {"", "", false}} {
		key, ok, err := s.LocateMessage(h.Ctx, c.id)
		if err != nil || ok != c.ok || key != c.key {
			t.Fatalf("LocateMessage(%q) = %q, %v, %v; want %q, %v", c.id, key, ok, err, c.key, c.ok)
		}
	}
	if h.CanReopen() {
		s = h.Reopen(t, s)
	}
	if key, ok, err := s.LocateMessage(h.Ctx, "p2"); err != nil || !ok || key != "a" {
		t.Fatalf("LocateMessage after reopen = %q, %v, %v", key, ok, err)
	}
}

func testErase(t *testing.T, h *harness) {
	s := h.Open(t)
	var stored []transcript.Entry
	for i := 1; i <= 3; i++ {
		e := entry(i)
		e.DeliveryID = fmt.Sprintf("d%d", i)
		stored = append(stored, mustAppend(t, s, "k", e))
	}
	if err := s.Erase(h.Ctx, "k", []uint64{2, 99}); err != nil {
		t.Fatalf("Erase: %v", err)
	}
	if err := s.Erase(h.Ctx, "k", []uint64{2}); err != nil { // again: a no-op
		t.Fatalf("Erase again: %v", err)
	}
	if err := s.Erase(h.Ctx, "nobody", []uint64{1}); err != nil {
		t.Fatalf("Erase of an unknown session: %v", err)
	}
	if h.CanReopen() {
		s = h.Reopen(t, s)
	}
	tail := mustTail(t, s, "k", 10)
	if len(tail) != 3 {
		t.Fatalf("after erase: %d entries, want 3 (the entry stays as a marker)", len(tail))
	}
	want := stored[1]
	want.Text, want.Deleted = "", true
	mustEqual(t, "erased entry", tail[1], want)
	mustEqual(t, "untouched entry", tail[0], stored[0])
	mustEqual(t, "untouched entry", tail[2], stored[2])
	if got, ok, err := s.ByMessageID(h.Ctx, "k", "m2"); err != nil || !ok || !got.Deleted || got.Text != "" {
		t.Fatalf("ByMessageID of an erased entry = %+v, %v, %v", got, ok, err)
	}
	// The delivery id still dedupes: a replayed send is not written again.
	dup := entry(2)
	dup.DeliveryID = "d2"
	if _, existed, err := s.Append(h.Ctx, "k", dup); err != nil || !existed {
		t.Fatalf("dedupe of an erased entry: existed=%v err=%v", existed, err)
	}
}
