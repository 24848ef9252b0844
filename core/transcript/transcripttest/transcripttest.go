package transcripttest

import (
	"context"
	"fmt"
	"github.com/agentbot/agentbot/internal/storetest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
)

// Option configures Run.
type Option = storetest.Option[transcript.Store]

type harness = storetest.Harness[transcript.Store]

// WithReopen supplies a hook that closes s and returns a store over the same
// persisted data. Without it, durability tests are skipped.
func WithReopen(fn func(t *testing.T, s transcript.Store) transcript.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the transcript.Store conformance suite. open must return a new,
// empty store for each call and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) transcript.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[transcript.Store]{
		{Name: "AppendAssignsSeqFromOne", Fn: testAppendSeq},
		{Name: "SessionsIndependent", Fn: testSessionsIndependent},
		{Name: "IdempotentByDeliveryID", Fn: testIdempotent},
		{Name: "EmptyDeliveryIDNeverDedupes", Fn: testEmptyDeliveryID},
		{Name: "EmptyKeyRejected", Fn: testEmptyKey},
		{Name: "CanceledContext", Fn: testCanceled},
		{Name: "Tail", Fn: testTail},
		{Name: "Range", Fn: testRange},
		{Name: "RangePagination", Fn: testRangePagination},
		{Name: "ByMessageID", Fn: testByMessageID},
		{Name: "Generation", Fn: testGeneration},
		{Name: "Sessions", Fn: testSessions},
		{Name: "MessageIDsNeverNil", Fn: testMessageIDsNeverNil},
		{Name: "RoundTripFields", Fn: testRoundTrip},
		{Name: "TimeRoundTrip", Fn: testTime},
		{Name: "CopySemantics", Fn: testCopies},
		{Name: "ConcurrentAppends", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
		{Name: "LocateMessage", Fn: testLocateMessage},
		{Name: "Erase", Fn: testErase},
		{Name: "CallsRideOnEntry", Fn: testCallsRideOnEntry},
	})
}

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

func entry(i int) transcript.Entry {
	return transcript.Entry{
		Role:       transcript.RoleUser,
		Author:     "u1",
		Text:       fmt.Sprintf("text %d", i),
		MessageIDs: []string{fmt.Sprintf("m%d", i)},
		Source:     transcript.SourceUser,
		At:         t0.Add(time.Duration(i) * time.Second),
	}
}

// norm makes entries comparable with reflect.DeepEqual: times become UTC
// without monotonic readings (equivalent to time.Equal).
func norm(e transcript.Entry) transcript.Entry {
	e.At = e.At.UTC().Round(0)
	return e
}

func mustEqual(t *testing.T, what string, got, want transcript.Entry) {
	t.Helper()
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

func mustAppend(t *testing.T, s transcript.Store, key string, e transcript.Entry) transcript.Entry {
	t.Helper()
	got, existed, err := s.Append(context.Background(), key, e)
	if err != nil {
		t.Fatalf("Append(%q): %v", key, err)
	}
	if existed {
		t.Fatalf("Append(%q, delivery %q): existed=true for a new entry", key, e.DeliveryID)
	}
	return got
}

func seqs(es []transcript.Entry) []uint64 {
	out := make([]uint64, 0, len(es))
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	out := []uint64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func mustTail(t *testing.T, s transcript.Store, key string, n int) []transcript.Entry {
	t.Helper()
	es, err := s.Tail(context.Background(), key, n)
	if err != nil {
		t.Fatalf("Tail(%q, %d): %v", key, n, err)
	}
	return es
}

func testAppendSeq(t *testing.T, h *harness) {
	s := h.Open(t)
	for i := 1; i <= 5; i++ {
		in := entry(i)
		in.Seq = 99             // ignored
		in.SessionKey = "other" // replaced
		got := mustAppend(t, s, "k", in)
		want := in
		want.Seq = uint64(i)
		want.SessionKey = "k"
		mustEqual(t, fmt.Sprintf("append %d", i), got, want)
	}
	all := mustTail(t, s, "k", 100)
	if got, want := seqs(all), seqRange(1, 5); !slices.Equal(got, want) {
		t.Fatalf("seqs = %v, want %v", got, want)
	}
	for i, e := range all {
		if e.Text != fmt.Sprintf("text %d", i+1) || e.SessionKey != "k" {
			t.Fatalf("entry %d = %+v", i, e)
		}
	}
}

func testSessionsIndependent(t *testing.T, h *harness) {
	s := h.Open(t)
	keys := []string{"agent:a:discord:channel:1", "agent:a:discord:channel:2", "x"}
	for i := 1; i <= 4; i++ {
		for j, k := range keys {
			e := entry(i*10 + j)
			e.DeliveryID = fmt.Sprintf("d%d", i) // same ids in every session
			got := mustAppend(t, s, k, e)
			if got.Seq != uint64(i) {
				t.Fatalf("session %q append %d: seq %d", k, i, got.Seq)
			}
		}
	}
	for j, k := range keys {
		es := mustTail(t, s, k, 10)
		if got, want := seqs(es), seqRange(1, 4); !slices.Equal(got, want) {
			t.Fatalf("session %q seqs = %v, want %v", k, got, want)
		}
		for i, e := range es {
			if want := fmt.Sprintf("text %d", (i+1)*10+j); e.Text != want || e.SessionKey != k {
				t.Fatalf("session %q entry %d: key %q text %q, want %q", k, i, e.SessionKey, e.Text, want)
			}
		}
	}
}

func testIdempotent(t *testing.T, h *harness) {
	cases := []struct {
		name     string
		dupText  string
		dupMsgID []string
	}{
		{"same text", "hello", []string{"m1"}},
		{"different text", "something else", []string{"m9"}},
		{"no message ids", "hello", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := h.Open(t)
			mustAppend(t, s, "k", entry(0)) // seq 1, no delivery id
			first := transcript.Entry{Role: transcript.RoleAssistant, Text: "hello", MessageIDs: []string{"m1"},
				Source: transcript.SourceJob, DeliveryID: "del-1", At: t0}
			stored := mustAppend(t, s, "k", first)
			if stored.Seq != 2 {
				t.Fatalf("first seq = %d, want 2", stored.Seq)
			}
			dup := first
			dup.Text = tc.dupText
			dup.MessageIDs = tc.dupMsgID
			dup.At = t0.Add(time.Hour)
			got, existed, err := s.Append(h.Ctx, "k", dup)
			if err != nil {
				t.Fatalf("dup Append: %v", err)
			}
			if !existed {
				t.Fatal("dup Append: existed=false")
			}
			mustEqual(t, "dup returns existing", got, stored)
			all := mustTail(t, s, "k", 10)
			if len(all) != 2 {
				t.Fatalf("dup was written: %d entries", len(all))
			}
			if tc.dupMsgID != nil && tc.dupMsgID[0] != "m1" {
				if _, ok, _ := s.ByMessageID(h.Ctx, "k", tc.dupMsgID[0]); ok {
					t.Fatal("dup indexed its message id")
				}
			}
			next := mustAppend(t, s, "k", entry(3))
			if next.Seq != 3 {
				t.Fatalf("next seq after dup = %d, want 3 (dup must not consume a seq)", next.Seq)
			}
			// A third attempt still dedupes.
			if _, existed, _ := s.Append(h.Ctx, "k", dup); !existed {
				t.Fatal("third Append: existed=false")
			}
		})
	}
}

func testEmptyDeliveryID(t *testing.T, h *harness) {
	s := h.Open(t)
	e := entry(1)
	e.DeliveryID = ""
	for i := 1; i <= 3; i++ {
		got := mustAppend(t, s, "k", e)
		if got.Seq != uint64(i) {
			t.Fatalf("append %d seq = %d", i, got.Seq)
		}
	}
	if n := len(mustTail(t, s, "k", 10)); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}

func testEmptyKey(t *testing.T, h *harness) {
	s := h.Open(t)
	if _, _, err := s.Append(h.Ctx, "", entry(1)); err == nil {
		t.Fatal("Append with empty key: no error")
	}
}

func testCanceled(t *testing.T, h *harness) {
	s := h.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Append(ctx, "k", entry(1)); err == nil {
		t.Fatal("Append with canceled context: no error")
	}
	if es := mustTail(t, s, "k", 10); len(es) != 0 {
		t.Fatalf("canceled Append wrote %d entries", len(es))
	}
}

func fill(t *testing.T, s transcript.Store, key string, n int) []transcript.Entry {
	t.Helper()
	out := make([]transcript.Entry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, mustAppend(t, s, key, entry(i)))
	}
	return out
}

func testTail(t *testing.T, h *harness) {
	s := h.Open(t)
	stored := fill(t, s, "k", 5)
	cases := []struct {
		key  string
		n    int
		want []uint64
	}{
		{"k", 0, nil},
		{"k", -1, nil},
		{"k", 1, []uint64{5}},
		{"k", 3, []uint64{3, 4, 5}},
		{"k", 5, seqRange(1, 5)},
		{"k", 6, seqRange(1, 5)},
		{"k", 1000, seqRange(1, 5)},
		{"unknown", 10, nil},
		{"unknown", 0, nil},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/n=%d", tc.key, tc.n), func(t *testing.T) {
			es := mustTail(t, s, tc.key, tc.n)
			if got := seqs(es); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("seqs = %v, want %v", got, tc.want)
			}
			for _, e := range es {
				mustEqual(t, "tail entry", e, stored[e.Seq-1])
			}
		})
	}
}

func testRange(t *testing.T, h *harness) {
	s := h.Open(t)
	stored := fill(t, s, "k", 10)
	cases := []struct {
		key   string
		from  uint64
		limit int
		want  []uint64
	}{
		{"k", 0, 0, seqRange(1, 10)},
		{"k", 1, 0, seqRange(1, 10)},
		{"k", 0, 3, seqRange(1, 3)},
		{"k", 1, 3, seqRange(1, 3)},
		{"k", 4, 3, seqRange(4, 6)},
		{"k", 9, 3, seqRange(9, 10)},
		{"k", 10, 1, []uint64{10}},
		{"k", 11, 5, nil},
		{"k", 1000, 0, nil},
		{"k", 5, -1, seqRange(5, 10)},
		{"k", 3, 100, seqRange(3, 10)},
		{"unknown", 1, 10, nil},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/from=%d/limit=%d", tc.key, tc.from, tc.limit), func(t *testing.T) {
			es, err := s.Range(h.Ctx, tc.key, tc.from, tc.limit)
			if err != nil {
				t.Fatalf("Range: %v", err)
			}
			if got := seqs(es); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("seqs = %v, want %v", got, tc.want)
			}
			for _, e := range es {
				mustEqual(t, "range entry", e, stored[e.Seq-1])
			}
		})
	}
}

func testRangePagination(t *testing.T, h *harness) {
	s := h.Open(t)
	const total = 23
	fill(t, s, "k", total)
	fill(t, s, "other", 7)
	for _, page := range []int{1, 2, 5, 7, 23, 50} {
		var got []uint64
		from := uint64(1)
		for calls := 0; ; calls++ {
			if calls > total+1 {
				t.Fatalf("page %d: pagination does not terminate", page)
			}
			es, err := s.Range(h.Ctx, "k", from, page)
			if err != nil {
				t.Fatalf("Range: %v", err)
			}
			if len(es) > page {
				t.Fatalf("page %d: got %d entries", page, len(es))
			}
			if len(es) == 0 {
				break
			}
			got = append(got, seqs(es)...)
			from = es[len(es)-1].Seq + 1
		}
		if want := seqRange(1, total); !slices.Equal(got, want) {
			t.Fatalf("page %d: visited %v, want %v", page, got, want)
		}
	}
}

func testByMessageID(t *testing.T, h *harness) {
	s := h.Open(t)
	e1 := entry(1)
	e1.MessageIDs = []string{"100", "101", "102"} // one text split into three messages
	e2 := entry(2)
	e2.MessageIDs = nil
	e3 := entry(3)
	e3.MessageIDs = []string{"103"}
	s1 := mustAppend(t, s, "k", e1)
	s2 := mustAppend(t, s, "k", e2)
	s3 := mustAppend(t, s, "k", e3)
	o := entry(4)
	o.MessageIDs = []string{"200"}
	mustAppend(t, s, "other", o)
	_ = s2

	cases := []struct {
		key, id string
		want    *transcript.Entry
	}{
		{"k", "100", &s1},
		{"k", "101", &s1},
		{"k", "102", &s1},
		{"k", "103", &s3},
		{"k", "104", nil},
		{"k", "", nil},
		{"k", "200", nil}, // other session's message
		{"other", "200", nil},
		{"other", "100", nil},
		{"unknown", "100", nil},
	}
	for _, tc := range cases {
		t.Run(tc.key+"/"+tc.id, func(t *testing.T) {
			got, ok, err := s.ByMessageID(h.Ctx, tc.key, tc.id)
			if err != nil {
				t.Fatalf("ByMessageID: %v", err)
			}
			if tc.key == "other" && tc.id == "200" {
				if !ok || got.Text != o.Text {
					t.Fatalf("other/200: ok=%v entry=%+v", ok, got)
				}
				return
			}
			if (tc.want != nil) != ok {
				t.Fatalf("found=%v, want %v", ok, tc.want != nil)
			}
			if tc.want != nil {
				mustEqual(t, "by message id", got, *tc.want)
			}
		})
	}
}

func testGeneration(t *testing.T, h *harness) {
	s := h.Open(t)
	gen := func(key string) int {
		t.Helper()
		g, err := s.Generation(h.Ctx, key)
		if err != nil {
			t.Fatalf("Generation(%q): %v", key, err)
		}
		return g
	}
	if g := gen("unknown"); g != 0 {
		t.Fatalf("unknown session generation = %d, want 0", g)
	}
	mustAppend(t, s, "k", entry(1))
	if g := gen("k"); g != 0 {
		t.Fatalf("new session generation = %d, want 0", g)
	}
	steps := []int{1, 2, 7, 3}
	for _, want := range steps {
		if err := s.SetGeneration(h.Ctx, "k", want); err != nil {
			t.Fatalf("SetGeneration: %v", err)
		}
		if g := gen("k"); g != want {
			t.Fatalf("generation = %d, want %d", g, want)
		}
	}
	if g := gen("other"); g != 0 {
		t.Fatalf("other session generation = %d, want 0", g)
	}
	// Entry.Generation is the caller's value, stored as given.
	e := entry(2)
	e.Generation = 3
	if got := mustAppend(t, s, "k", e); got.Generation != 3 {
		t.Fatalf("entry generation = %d, want 3", got.Generation)
	}
	// SetGeneration before any entry.
	if err := s.SetGeneration(h.Ctx, "fresh", 5); err != nil {
		t.Fatalf("SetGeneration(fresh): %v", err)
	}
	if g := gen("fresh"); g != 5 {
		t.Fatalf("fresh generation = %d, want 5", g)
	}
	if got := mustAppend(t, s, "fresh", entry(1)); got.Seq != 1 {
		t.Fatalf("first seq after SetGeneration = %d, want 1", got.Seq)
	}
}

func testSessions(t *testing.T, h *harness) {
	s := h.Open(t)
	got, err := s.Sessions(h.Ctx)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("empty store sessions = %v", got)
	}
	keys := []string{"agent:main:discord:channel:9", "a", "b", "agent:main:discord:dm:user:1"}
	for i, k := range keys {
		for j := 0; j <= i; j++ {
			mustAppend(t, s, k, entry(j))
		}
	}
	got, err = s.Sessions(h.Ctx)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	got = slices.Clone(got)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("sessions = %q, want %q", got, want)
	}
}

func testMessageIDsNeverNil(t *testing.T, h *harness) {
	s := h.Open(t)
	for i, ids := range [][]string{nil, {}} {
		e := entry(i)
		e.MessageIDs = ids
		got := mustAppend(t, s, "k", e)
		if got.MessageIDs == nil || len(got.MessageIDs) != 0 {
			t.Fatalf("Append returned MessageIDs %#v, want []string{}", got.MessageIDs)
		}
	}
	check := func(where string, es []transcript.Entry) {
		t.Helper()
		if len(es) != 2 {
			t.Fatalf("%s: %d entries", where, len(es))
		}
		for _, e := range es {
			if e.MessageIDs == nil || len(e.MessageIDs) != 0 {
				t.Fatalf("%s: MessageIDs %#v, want []string{}", where, e.MessageIDs)
			}
		}
	}
	check("Tail", mustTail(t, s, "k", 10))
	es, err := s.Range(h.Ctx, "k", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Range", es)
	if h.CanReopen() {
		s = h.Reopen(t, s)
		check("Tail after reopen", mustTail(t, s, "k", 10))
	}
}
