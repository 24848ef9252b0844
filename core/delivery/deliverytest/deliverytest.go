package deliverytest

import (
	"fmt"
	"github.com/agentbot/agentbot/internal/storetest"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Option configures Run.
type Option = storetest.Option[delivery.Store]

type harness = storetest.Harness[delivery.Store]

// WithReopen supplies a hook that closes s and returns a store over the same
// persisted data. Without it, durability tests are skipped.
func WithReopen(fn func(t *testing.T, s delivery.Store) delivery.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the delivery.Store conformance suite. open must return a new,
// empty store for each call and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) delivery.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[delivery.Store]{
		{Name: "PutGet", Fn: testPutGet},
		{Name: "GetUnknown", Fn: testGetUnknown},
		{Name: "EmptyIDRejected", Fn: testEmptyID},
		{Name: "Replace", Fn: testReplace},
		{Name: "ListNewestFirst", Fn: testList},
		{Name: "ReplaceMovesInList", Fn: testReplaceMoves},
		{Name: "CopySemantics", Fn: testCopies},
		{Name: "Concurrent", Fn: testConcurrent},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func rec(id string, state delivery.PendingState, created time.Time) delivery.Record {
	return delivery.Record{
		Delivery: delivery.Delivery{
			ID: id,
			Target: binding.ConversationRef{Channel: "discord", AccountID: "default",
				ConversationID: "thread-1", ParentConversationID: "chan-1"},
			Text:     "result of " + id,
			Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"},
		},
		State:     state,
		CreatedAt: created,
		UpdatedAt: created,
	}
}

func norm(r delivery.Record) delivery.Record {
	r.CreatedAt = r.CreatedAt.UTC().Round(0)
	r.UpdatedAt = r.UpdatedAt.UTC().Round(0)
	return r
}

func mustEqual(t *testing.T, what string, got, want delivery.Record) {
	t.Helper()
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

func put(t *testing.T, h *harness, s delivery.Store, recs ...delivery.Record) {
	t.Helper()
	for _, r := range recs {
		if err := s.PutDelivery(h.Ctx, r); err != nil {
			t.Fatalf("PutDelivery(%s): %v", r.Delivery.ID, err)
		}
	}
}

func get(t *testing.T, h *harness, s delivery.Store, id string) delivery.Record {
	t.Helper()
	r, ok, err := s.GetDelivery(h.Ctx, id)
	if err != nil || !ok {
		t.Fatalf("GetDelivery(%s): ok=%v err=%v", id, ok, err)
	}
	return r
}

func ids(rs []delivery.Record) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Delivery.ID)
	}
	return out
}

func listIDs(t *testing.T, h *harness, s delivery.Store, state delivery.PendingState, limit int) []string {
	t.Helper()
	rs, err := s.Deliveries(h.Ctx, state, limit)
	if err != nil {
		t.Fatalf("Deliveries(%q, %d): %v", state, limit, err)
	}
	return ids(rs)
}

func testPutGet(t *testing.T, h *harness) {
	s := h.Open(t)
	zone := time.FixedZone("Z", 9*3600)
	full := delivery.Record{
		Delivery: delivery.Delivery{
			ID:      "d-full",
			Target:  binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "user:42"},
			Text:    "multi\nline ✓",
			Persona: delivery.Persona{Name: "Worker", AvatarURL: "https://x/y.png"},
			ReplyTo: "m-1",
			Producer: delivery.Producer{Source: transcript.SourceAnnounce, TurnSessionKey: "agent:main:x",
				AgentID: "main", Meta: map[string]string{"jobId": "j1"}},
			Native: true, ViaWebhook: true, BindingID: "b1",
		},
		State:      delivery.StateDelivered,
		SessionKey: "agent:main:discord:channel:1",
		MessageIDs: []string{"1", "2"},
		// The text of the parts displayed before a later part failed.
		DisplayedText: "multi\n",
		// A live delivery's per-part texts (about to be shown).
		Live:      true,
		LiveParts: []string{"multi\n", "line ✓"},
		Error:     "none",
		Reason:    "bound",
		CreatedAt: time.Date(2025, 5, 5, 5, 5, 5, 555, zone),
		UpdatedAt: time.Now(),
	}
	minimal := delivery.Record{Delivery: delivery.Delivery{ID: "d-min"}}
	empties := rec("d-empty", delivery.StatePending, t0)
	empties.MessageIDs = []string{}
	empties.Delivery.Producer.Meta = map[string]string{}
	put(t, h, s, full, minimal, empties)
	mustEqual(t, "full", get(t, h, s, "d-full"), full)
	mustEqual(t, "minimal", get(t, h, s, "d-min"), minimal)
	wantEmpty := empties
	wantEmpty.MessageIDs = nil
	wantEmpty.Delivery.Producer.Meta = nil
	mustEqual(t, "empties", get(t, h, s, "d-empty"), wantEmpty)
	g := get(t, h, s, "d-full")
	if !g.CreatedAt.Equal(full.CreatedAt) || !g.UpdatedAt.Equal(full.UpdatedAt) {
		t.Fatalf("times not Equal: %v %v", g.CreatedAt, g.UpdatedAt)
	}
	if !get(t, h, s, "d-min").CreatedAt.IsZero() {
		t.Fatal("zero CreatedAt not zero after round trip")
	}
}

func testGetUnknown(t *testing.T, h *harness) {
	s := h.Open(t)
	for _, id := range []string{"nope", ""} {
		if _, ok, err := s.GetDelivery(h.Ctx, id); ok || err != nil {
			t.Fatalf("GetDelivery(%q): ok=%v err=%v", id, ok, err)
		}
	}
	if got := listIDs(t, h, s, "", 0); len(got) != 0 {
		t.Fatalf("empty store lists %v", got)
	}
}

func testEmptyID(t *testing.T, h *harness) {
	s := h.Open(t)
	if err := s.PutDelivery(h.Ctx, rec("", delivery.StatePending, t0)); err == nil {
		t.Fatal("PutDelivery with empty id: no error")
	}
	if got := listIDs(t, h, s, "", 0); len(got) != 0 {
		t.Fatalf("empty id was stored: %v", got)
	}
}

func testReplace(t *testing.T, h *harness) {
	s := h.Open(t)
	p := rec("d1", delivery.StatePending, t0)
	put(t, h, s, p)
	done := p
	done.State = delivery.StateDelivered
	done.MessageIDs = []string{"m1", "m2"}
	done.SessionKey = "k"
	done.UpdatedAt = t0.Add(time.Second)
	put(t, h, s, done)
	mustEqual(t, "replaced", get(t, h, s, "d1"), done)
	if got := listIDs(t, h, s, delivery.StatePending, 0); len(got) != 0 {
		t.Fatalf("pending after replace = %v", got)
	}
	if got := listIDs(t, h, s, delivery.StateDelivered, 0); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("delivered after replace = %v", got)
	}
	if got := listIDs(t, h, s, "", 0); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("all after replace = %v", got)
	}
}

func listFixture(t *testing.T, h *harness) delivery.Store {
	s := h.Open(t)
	// d0..d9 created one minute apart, put in a scrambled order.
	states := []delivery.PendingState{
		delivery.StatePending, delivery.StateDelivered, delivery.StateFailed, delivery.StatePending,
		delivery.StateDelivered, delivery.StateSkipped, delivery.StatePending, delivery.StateDelivered,
		delivery.StateDelivered, delivery.StatePending,
	}
	for _, i := range []int{3, 7, 0, 9, 1, 5, 8, 2, 6, 4} {
		// Mixed zones must not disturb the ordering.
		at := t0.Add(time.Duration(i) * time.Minute)
		if i%2 == 1 {
			at = at.In(time.FixedZone("E", -5*3600))
		}
		put(t, h, s, rec(fmt.Sprintf("d%d", i), states[i], at))
	}
	return s
}

func testList(t *testing.T, h *harness) {
	s := listFixture(t, h)
	cases := []struct {
		state delivery.PendingState
		limit int
		want  []string
	}{
		{"", 0, []string{"d9", "d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1", "d0"}},
		{"", 3, []string{"d9", "d8", "d7"}},
		{"", 100, []string{"d9", "d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1", "d0"}},
		{delivery.StatePending, 0, []string{"d9", "d6", "d3", "d0"}},
		{delivery.StatePending, 1, []string{"d9"}},
		{delivery.StatePending, 2, []string{"d9", "d6"}},
		{delivery.StateDelivered, 0, []string{"d8", "d7", "d4", "d1"}},
		{delivery.StateDelivered, 3, []string{"d8", "d7", "d4"}},
		{delivery.StateFailed, 0, []string{"d2"}},
		{delivery.StateSkipped, 5, []string{"d5"}},
		{"no-such-state", 0, []string{}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("state=%q/limit=%d", tc.state, tc.limit), func(t *testing.T) {
			rs, err := s.Deliveries(h.Ctx, tc.state, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(rs); !slices.Equal(got, tc.want) {
				t.Fatalf("ids = %v, want %v", got, tc.want)
			}
			for _, r := range rs {
				if tc.state != "" && r.State != tc.state {
					t.Fatalf("%s has state %q", r.Delivery.ID, r.State)
				}
				mustEqual(t, "listed record", r, get(t, h, s, r.Delivery.ID))
			}
		})
	}
}

func testReplaceMoves(t *testing.T, h *harness) {
	s := listFixture(t, h)
	r := get(t, h, s, "d0")
	r.CreatedAt = t0.Add(time.Hour) // now the newest
	r.State = delivery.StateFailed
	put(t, h, s, r)
	if got, want := listIDs(t, h, s, "", 0), []string{"d0", "d9", "d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1"}; !slices.Equal(got, want) {
		t.Fatalf("all = %v, want %v", got, want)
	}
	if got, want := listIDs(t, h, s, delivery.StateFailed, 0), []string{"d0", "d2"}; !slices.Equal(got, want) {
		t.Fatalf("failed = %v, want %v", got, want)
	}
	if got, want := listIDs(t, h, s, delivery.StatePending, 0), []string{"d9", "d6", "d3"}; !slices.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
}

func testCopies(t *testing.T, h *harness) {
	s := h.Open(t)
	in := rec("d1", delivery.StateDelivered, t0)
	in.MessageIDs = []string{"m1"}
	in.LiveParts = []string{"p1"}
	in.Delivery.Producer.Meta = map[string]string{"a": "1"}
	put(t, h, s, in)
	want := in
	want.MessageIDs = []string{"m1"}
	want.LiveParts = []string{"p1"}
	want.Delivery.Producer.Meta = map[string]string{"a": "1"}
	in.MessageIDs[0] = "mutated"
	in.LiveParts[0] = "mutated"
	in.Delivery.Producer.Meta["a"] = "mutated"
	got := get(t, h, s, "d1")
	got.MessageIDs[0] = "mutated-out"
	got.LiveParts[0] = "mutated-out"
	got.Delivery.Producer.Meta["a"] = "mutated-out"
	mustEqual(t, "after mutation", get(t, h, s, "d1"), want)
	rs, _ := s.Deliveries(h.Ctx, "", 0)
	rs[0].MessageIDs[0] = "mutated-list"
	mustEqual(t, "after mutating list", get(t, h, s, "d1"), want)
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	const goroutines, per = 8, 25
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range per {
				n := g*per + i
				r := rec(fmt.Sprintf("d%03d", n), delivery.StatePending, t0.Add(time.Duration(n)*time.Second))
				if err := s.PutDelivery(h.Ctx, r); err != nil {
					t.Errorf("PutDelivery: %v", err)
					return
				}
				r.State = delivery.StateDelivered
				if err := s.PutDelivery(h.Ctx, r); err != nil {
					t.Errorf("PutDelivery: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got := listIDs(t, h, s, delivery.StateDelivered, 0)
	if len(got) != goroutines*per {
		t.Fatalf("%d delivered, want %d", len(got), goroutines*per)
	}
	for i, id := range got {
		if want := fmt.Sprintf("d%03d", goroutines*per-1-i); id != want {
			t.Fatalf("position %d: %s, want %s", i, id, want)
		}
	}
	if p := listIDs(t, h, s, delivery.StatePending, 0); len(p) != 0 {
		t.Fatalf("pending left: %v", p)
	}
}

func testDurable(t *testing.T, h *harness) {
	s := listFixture(t, h)
	before, err := s.Deliveries(h.Ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	after, err := s.Deliveries(h.Ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("after reopen %d records, want %d", len(after), len(before))
	}
	for i := range before {
		mustEqual(t, "after reopen", after[i], before[i])
	}
	if got, want := listIDs(t, h, s, delivery.StatePending, 2), []string{"d9", "d6"}; !slices.Equal(got, want) {
		t.Fatalf("pending after reopen = %v, want %v", got, want)
	}
}
