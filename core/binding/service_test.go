package binding_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
)

// fakeStore is a hand-written binding.Store that can be told to fail.
type fakeStore struct {
	mu   sync.Mutex
	recs map[string]binding.Record
	puts int
	fail error
}

func newFakeStore() *fakeStore { return &fakeStore{recs: map[string]binding.Record{}} }

func (f *fakeStore) PutBindings(_ context.Context, recs ...binding.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.puts++
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	return nil
}

func (f *fakeStore) Bindings(context.Context) ([]binding.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]binding.Record, 0, len(f.recs))
	for _, r := range f.recs {
		out = append(out, r)
	}
	return out, nil
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func thread(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "bot", ConversationID: id, ParentConversationID: "parent"}
}

func newService(t *testing.T) (*binding.Service, *fakeStore, *clock.Fake) {
	t.Helper()
	return newServiceEnded(t, nil)
}

// newServiceEnded is newService with onEnded told of every ended binding.
func newServiceEnded(t *testing.T, onEnded binding.EndedFunc) (*binding.Service, *fakeStore, *clock.Fake) {
	t.Helper()
	st := newFakeStore()
	clk := clock.NewFake(t0)
	s := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop(), OnEnded: onEnded})
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, st, clk
}

func TestNormalizeMatchesBeforeLookup(t *testing.T) {
	s, _, _ := newService(t)
	ctx := context.Background()
	if _, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "agent:main:subagent:1", Conversation: binding.ConversationRef{Channel: "discord", AccountID: "runtime", ConversationID: "thread-2"}}); err != nil {
		t.Fatal(err)
	}
	tests := []binding.ConversationRef{
		{Channel: " DISCORD ", AccountID: " Runtime ", ConversationID: " thread-2 "},
		{Channel: "discord", AccountID: "RUNTIME", ConversationID: "thread-2", ParentConversationID: "thread-2"},
	}
	for _, ref := range tests {
		if _, ok := s.ResolveByConversation(ref); !ok {
			t.Errorf("ResolveByConversation(%+v) found nothing", ref)
		}
	}
	if _, ok := s.ResolveByConversation(binding.ConversationRef{Channel: "discord", AccountID: "other", ConversationID: "thread-2"}); ok {
		t.Error("a different account matched")
	}
}

func TestNormalizeAccountID(t *testing.T) {
	tests := map[string]string{"": "default", "  ": "default", "Runtime": "runtime", "a b!": "a-b", "--x--": "x", "ok_id-1": "ok_id-1"}
	for in, want := range tests {
		if got := binding.NormalizeAccountID(in); got != want {
			t.Errorf("NormalizeAccountID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBindRebindAndSameTarget(t *testing.T) {
	var ended []binding.Record
	s, st, _ := newServiceEnded(t, func(r binding.Record) { ended = append(ended, r) })
	ctx := context.Background()

	a, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("t1"), BoundBy: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("t1")})
	if err != nil || again.ID != a.ID {
		t.Fatalf("same target rebind: got %v %v, want the existing binding %s", again.ID, err, a.ID)
	}
	b, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: thread("t1")})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := s.ResolveByConversation(thread("t1"))
	if !ok || got.ID != b.ID || got.TargetSessionKey != "s2" {
		t.Fatalf("resolve after rebind = %+v, %v; want binding to s2", got, ok)
	}
	if len(ended) != 1 || ended[0].ID != a.ID || ended[0].EndedReason != binding.ReasonRebound || ended[0].Status != binding.StatusEnded {
		t.Fatalf("ended events = %+v, want the first binding ended as rebound", ended)
	}
	if st.recs[a.ID].Status != binding.StatusEnded {
		t.Errorf("store still has the old binding %s", st.recs[a.ID].Status)
	}
	if len(s.ListBySession("s1")) != 0 || len(s.ListBySession("s2")) != 1 {
		t.Error("ListBySession disagrees with the rebind")
	}
}

func TestBindRejectsBadInput(t *testing.T) {
	s, _, _ := newService(t)
	for _, in := range []binding.BindInput{
		{TargetSessionKey: "s", Conversation: binding.ConversationRef{Channel: "discord"}},
		{TargetSessionKey: "", Conversation: thread("t")},
	} {
		if _, err := s.Bind(context.Background(), in); !errors.Is(err, binding.ErrInvalidInput) {
			t.Errorf("Bind(%+v) err = %v, want ErrInvalidInput", in, err)
		}
	}
}

func TestBindStoreFailureLeavesIndexUnchanged(t *testing.T) {
	s, st, _ := newService(t)
	st.fail = errors.New("disk full")
	if _, err := s.Bind(context.Background(), binding.BindInput{TargetSessionKey: "s", Conversation: thread("t")}); err == nil {
		t.Fatal("bind succeeded on a failing store")
	}
	if _, ok := s.ResolveByConversation(thread("t")); ok {
		t.Fatal("a binding the store never saved is served")
	}
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		name       string
		idle, max  time.Duration
		touchAfter time.Duration // 0: no touch
		advance    time.Duration
		wantActive bool
		wantReason string
	}{
		{name: "idle expires", idle: time.Hour, advance: time.Hour, wantReason: binding.ReasonIdleExpired},
		{name: "touch extends idle", idle: time.Hour, touchAfter: 50 * time.Minute, advance: 90 * time.Minute, wantActive: true},
		{name: "max age ignores touch", max: time.Hour, touchAfter: 50 * time.Minute, advance: time.Hour, wantReason: binding.ReasonMaxAgeExpired},
		{name: "zero disables both", advance: 1000 * time.Hour, wantActive: true},
		{name: "max age before idle", idle: 2 * time.Hour, max: time.Hour, advance: 61 * time.Minute, wantReason: binding.ReasonMaxAgeExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ended []binding.Record
			s, st, clk := newServiceEnded(t, func(r binding.Record) { ended = append(ended, r) })
			ctx := context.Background()
			rec, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t"), IdleTimeout: tc.idle, MaxAge: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			if tc.touchAfter > 0 {
				s.Touch(rec.ID, t0.Add(tc.touchAfter))
			}
			clk.Set(t0.Add(tc.advance))
			_, active := s.ResolveByConversation(thread("t"))
			if active != tc.wantActive {
				t.Fatalf("active = %v, want %v", active, tc.wantActive)
			}
			swept, err := s.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantActive {
				if len(swept) != 0 {
					t.Fatalf("swept %+v", swept)
				}
				return
			}
			if len(swept) != 1 || swept[0].EndedReason != tc.wantReason || len(ended) != 1 {
				t.Fatalf("swept = %+v, ended events %d; want one with %s", swept, len(ended), tc.wantReason)
			}
			if st.recs[rec.ID].EndedReason != tc.wantReason {
				t.Errorf("stored reason %q", st.recs[rec.ID].EndedReason)
			}
		})
	}
}

func TestTouchKeepsLatestAndFlushPersists(t *testing.T) {
	s, st, _ := newService(t)
	ctx := context.Background()
	rec, _ := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t")})
	s.Touch(rec.ID, t0.Add(2*time.Minute))
	s.Touch(rec.ID, t0.Add(time.Minute)) // older: ignored
	if st.recs[rec.ID].LastActivityAt != t0 {
		t.Fatal("touch wrote through before Flush (it should be throttled)")
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.recs[rec.ID].LastActivityAt; !got.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("persisted activity %v, want %v", got, t0.Add(2*time.Minute))
	}
	puts := st.puts
	if err := s.Flush(ctx); err != nil || st.puts != puts {
		t.Fatal("an idle flush wrote to the store")
	}
}

func TestRunFlushesOnStop(t *testing.T) {
	s, st, _ := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	rec, _ := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t")})
	s.Touch(rec.ID, t0.Add(time.Hour))
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !st.recs[rec.ID].LastActivityAt.Equal(t0.Add(time.Hour)) {
		t.Fatal("graceful stop did not flush the touch")
	}
}

func TestLoadRestoresActiveOnly(t *testing.T) {
	s, st, clk := newService(t)
	ctx := context.Background()
	a, _ := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("t1")})
	b, _ := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: thread("t2")})
	if _, err := s.Unbind(ctx, binding.UnbindInput{ID: b.ID, Reason: binding.ReasonThreadDelete}); err != nil {
		t.Fatal(err)
	}
	fresh := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	if err := fresh.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := fresh.ResolveByConversation(thread("t1")); !ok || got.ID != a.ID {
		t.Fatal("active binding lost across restart")
	}
	if _, ok := fresh.ResolveByConversation(thread("t2")); ok {
		t.Fatal("ended binding came back after restart")
	}
	all, err := fresh.All(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("All = %d records, %v; want active and ended", len(all), err)
	}
}

func TestUnbindBySession(t *testing.T) {
	// Two active bindings of one session: a store written before a
	// session could be bound to one conversation only.
	st := newFakeStore()
	for _, id := range []string{"t1", "t2"} {
		st.recs[id] = binding.Record{ID: id, TargetSessionKey: "s", TargetKind: binding.KindSession, Conversation: thread(id).Normalize(),
			Status: binding.StatusActive, BoundAt: t0, LastActivityAt: t0}
	}
	s := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clock.NewFake(t0), Log: zerolog.Nop()})
	ctx := context.Background()
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	ended, err := s.Unbind(ctx, binding.UnbindInput{TargetSessionKey: "s", Reason: binding.ReasonManual})
	if err != nil || len(ended) != 2 {
		t.Fatalf("Unbind = %d, %v", len(ended), err)
	}
	for _, r := range ended {
		if r.Status != binding.StatusEnded || r.EndedReason != binding.ReasonManual || !r.EndedAt.Equal(t0) {
			t.Errorf("ended record %+v", r)
		}
	}
	if again, _ := s.Unbind(ctx, binding.UnbindInput{TargetSessionKey: "s", Reason: "x"}); len(again) != 0 {
		t.Error("second unbind ended something")
	}
}

func TestResolveDoesNotAllocate(t *testing.T) {
	s, _, _ := newService(t)
	ctx := context.Background()
	if _, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t")}); err != nil {
		t.Fatal(err)
	}
	ref := thread("t")
	if n := testing.AllocsPerRun(100, func() { s.ResolveByConversation(ref) }); n != 0 {
		t.Fatalf("ResolveByConversation allocates %v times per call", n)
	}
}

// A session is bound to at most one conversation: binding it elsewhere
// ends the old binding as moved (naming the new conversation) in the same
// store write, and the ended event lets the old thread be told.
func TestBindMovesSessionBinding(t *testing.T) {
	var ended []binding.Record
	s, st, _ := newServiceEnded(t, func(r binding.Record) { ended = append(ended, r) })
	ctx := context.Background()
	a, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t1"), BoundBy: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	puts := st.puts
	b, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t2"), BoundBy: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	if st.puts != puts+1 {
		t.Errorf("move took %d store writes, want 1 (atomic)", st.puts-puts)
	}
	if _, ok := s.ResolveByConversation(thread("t1")); ok {
		t.Error("the old thread still routes to the moved session")
	}
	if bs := s.ListBySession("s"); len(bs) != 1 || bs[0].ID != b.ID {
		t.Fatalf("ListBySession = %+v, want only the new binding", bs)
	}
	if len(ended) != 1 || ended[0].ID != a.ID || ended[0].EndedReason != binding.ReasonMoved || ended[0].Metadata[binding.MetaMovedTo] != "t2" {
		t.Fatalf("ended = %+v, want %s moved to t2", ended, a.ID)
	}
	if r := st.recs[a.ID]; r.Status != binding.StatusEnded || r.EndedReason != binding.ReasonMoved {
		t.Errorf("stored old binding = %+v", r)
	}
}

// "Ever bound" is a property of the binding records, whatever made them
// and whether they ended: known after a restart from ended records, and at
// once after any Bind.
func TestEverBound(t *testing.T) {
	s, st, clk := newService(t)
	ctx := context.Background()
	if s.EverBound("s") {
		t.Fatal("never bound, but EverBound")
	}
	a, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t1")})
	if err != nil {
		t.Fatal(err)
	}
	if !s.EverBound("s") {
		t.Fatal("bound, but not EverBound")
	}
	if _, err := s.Unbind(ctx, binding.UnbindInput{ID: a.ID, Reason: binding.ReasonThreadArchive}); err != nil {
		t.Fatal(err)
	}
	fresh := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	if err := fresh.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !fresh.EverBound("s") || fresh.EverBound("other") {
		t.Fatalf("after restart: EverBound(s)=%v EverBound(other)=%v, want true/false", fresh.EverBound("s"), fresh.EverBound("other"))
	}
}

// threadBindings.enabled: false on a store that has bindings: they route
// nothing, nothing is written, and a later enabled start restores them.
func TestDisabledKeepsBindingsAndRoutesNone(t *testing.T) {
	s, st, clk := newService(t)
	ctx := context.Background()
	a, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s", Conversation: thread("t1"), IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	off := binding.New(binding.Options{Disabled: true}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	if err := off.Load(ctx); err != nil {
		t.Fatal(err)
	}
	puts := st.puts
	if _, ok := off.ResolveByConversation(thread("t1")); ok {
		t.Error("disabled: the thread still routes to its binding")
	}
	if len(off.ListBySession("s")) != 0 || len(off.Active()) != 0 || off.EverBound("s") {
		t.Error("disabled: the binding is still listed or counts as bound")
	}
	if _, err := off.Bind(ctx, binding.BindInput{TargetSessionKey: "x", Conversation: thread("t9")}); !errors.Is(err, binding.ErrDisabled) {
		t.Errorf("disabled Bind = %v, want ErrDisabled", err)
	}
	off.Touch(a.ID, t0.Add(time.Minute))
	clk.Advance(2 * time.Hour)
	if _, err := off.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := off.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ended, _ := off.Unbind(ctx, binding.UnbindInput{TargetSessionKey: "s", Reason: binding.ReasonManual}); len(ended) != 0 {
		t.Error("disabled Unbind ended a kept binding")
	}
	if st.puts != puts {
		t.Errorf("disabled service wrote bindings %d times", st.puts-puts)
	}
	if r := st.recs[a.ID]; r.Status != binding.StatusActive {
		t.Fatalf("kept record = %+v, want still active", r)
	}
	clk.Set(t0.Add(time.Minute))
	on := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	if err := on.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := on.ResolveByConversation(thread("t1")); !ok || got.ID != a.ID {
		t.Fatal("enabling bindings again did not restore the kept binding")
	}
}

// TestMatrixThreadKeyIncludesRoom: a Matrix thread is (room, root event): the same root id claimed under another
// room (a crafted m.relates_to) resolves to nothing, and its Key differs (issue 26.2, invariant 18).
func TestMatrixThreadKeyIncludesRoom(t *testing.T) {
	s, _, _ := newService(t)
	ctx := context.Background()
	mx := func(conv, parent string) binding.ConversationRef {
		return binding.ConversationRef{Channel: "matrix", ConversationID: conv, ParentConversationID: parent}
	}
	if _, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "agent:main:subagent:1", Conversation: mx("$root", "!a:hs")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref  binding.ConversationRef
		want bool
	}{
		{mx("$root", "!a:hs"), true},
		{mx("$root", "!b:hs"), false},
		{mx("$root", ""), false},
	}
	for _, tc := range tests {
		if _, ok := s.ResolveByConversation(tc.ref); ok != tc.want {
			t.Errorf("ResolveByConversation(%+v) = %v, want %v", tc.ref, ok, tc.want)
		}
	}
	if mx("$root", "!a:hs").Key() == mx("$root", "!b:hs").Key() {
		t.Error("one Key for a thread root under two rooms")
	}
	if (binding.ConversationRef{Channel: "discord", ConversationID: "1", ParentConversationID: "2"}).Key() != (binding.ConversationRef{Channel: "discord", ConversationID: "1"}).Key() {
		t.Error("a Discord thread's Key depends on its parent")
	}
}
