package transcripttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
)

// testCallsRideOnEntry: an entry's usage records (Entry.Calls) are written
// with it by the store, which keeps usage records too; a replay found by
// its delivery id writes none; the entry read back carries none; both
// survive a reopen.
func testCallsRideOnEntry(t *testing.T, h *harness) {
	s := h.Open(t)
	if _, ok := s.(usage.Store); !ok {
		t.Fatalf("%T keeps no usage records: the usage records an entry carries (Entry.Calls) are written with it", s)
	}
	call := func(i int) usage.Record {
		return usage.Record{At: t0.Add(time.Duration(i) * time.Second), Model: "default", Agent: "main", User: "u1", Place: "g1",
			SessionKey: "k", Run: "turn:1", Input: int64(100 * i), Output: int64(i), Cost: float64(i) / 1000}
	}
	e := entry(1)
	e.DeliveryID = "turn:1"
	e.Calls = []usage.Record{call(1), call(2)}
	stored := mustAppend(t, s, "k", e)
	if stored.Calls != nil {
		t.Fatalf("Append returned the entry with its calls %+v", stored.Calls)
	}
	records := func(s transcript.Store) []usage.Record {
		t.Helper()
		rs, err := s.(usage.Store).Usage(h.Ctx, usage.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	want := fmt.Sprint([]usage.Record{call(1), call(2)})
	if got := records(s); fmt.Sprint(got) != want {
		t.Fatalf("usage records after Append\n%v\nwant\n%v", got, want)
	}
	replay := e
	replay.Calls = []usage.Record{call(3)}
	if _, existed, err := s.Append(h.Ctx, "k", replay); err != nil || !existed {
		t.Fatalf("replay: existed=%v err=%v", existed, err)
	}
	if got := records(s); fmt.Sprint(got) != want {
		t.Fatalf("a replay wrote usage records: %v", got)
	}
	tail := mustTail(t, s, "k", 1)
	if tail[0].Calls != nil {
		t.Fatalf("entry read back with calls %+v", tail[0].Calls)
	}
	if !h.CanReopen() {
		return
	}
	s = h.Reopen(t, s)
	if got := records(s); fmt.Sprint(got) != want {
		t.Fatalf("usage records after reopen\n%v\nwant\n%v", got, want)
	}
}
