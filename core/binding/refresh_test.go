package binding_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
)

// Two services on one store stand for two processes.
func twoServices(t *testing.T) (a, b *binding.Service, st *fakeStore, clk *clock.Fake) {
	t.Helper()
	return twoServicesEnded(t, nil)
}

// twoServicesEnded is twoServices with bEnded told of b's ended bindings.
func twoServicesEnded(t *testing.T, bEnded binding.EndedFunc) (a, b *binding.Service, st *fakeStore, clk *clock.Fake) {
	t.Helper()
	st = newFakeStore()
	clk = clock.NewFake(t0)
	a = binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
	b = binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop(), OnEnded: bEnded})
	for _, s := range []*binding.Service{a, b} {
		if err := s.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, st, clk
}

func TestRefreshAppliesRemoteBindAndUnbind(t *testing.T) {
	var endedInB int
	a, b, st, _ := twoServicesEnded(t, func(binding.Record) { endedInB++ })
	ctx := context.Background()

	r, err := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("100")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ResolveByConversation(thread("100")); ok {
		t.Fatal("b resolved a binding it has not been told about")
	}
	puts := st.puts
	if err := b.Refresh(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.ResolveByConversation(thread("100")); !ok || got.ID != r.ID {
		t.Fatalf("after Refresh b resolves %+v %v, want %s", got, ok, r.ID)
	}
	if len(b.ListBySession("s1")) != 1 {
		t.Fatal("ListBySession misses the refreshed binding")
	}
	if st.puts != puts {
		t.Fatal("Refresh wrote to the store")
	}

	// Rebind elsewhere in a: both the new and the ended record reach b.
	r2, err := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: thread("100")})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx, r2.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.ResolveByConversation(thread("100")); !ok || got.ID != r2.ID {
		t.Fatalf("after rebind b resolves %+v %v, want %s", got, ok, r2.ID)
	}
	if _, ok := b.Get(r.ID); ok {
		t.Fatal("the rebound (ended) record is still indexed in b")
	}

	if _, err := a.Unbind(ctx, binding.UnbindInput{ID: r2.ID, Reason: binding.ReasonManual}); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ResolveByConversation(thread("100")); ok {
		t.Fatal("b still resolves an unbound conversation")
	}
	if len(b.Active()) != 0 || endedInB != 0 {
		t.Fatalf("b: active %d, ended callbacks %d; want 0, 0 (a notified its own)", len(b.Active()), endedInB)
	}
}

func TestRefreshOrderOfNoticesDoesNotMatter(t *testing.T) {
	a, b, _, _ := twoServices(t)
	ctx := context.Background()
	r1, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("7")})
	if err := b.Refresh(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	r2, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: thread("7")})
	// Only the new id arrives first: it takes the conversation over.
	if err := b.Refresh(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.ResolveByConversation(thread("7")); !ok || got.ID != r2.ID {
		t.Fatalf("b resolves %+v %v, want %s", got, ok, r2.ID)
	}
	if err := b.Refresh(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.ResolveByConversation(thread("7")); !ok || got.ID != r2.ID {
		t.Fatalf("after the late notice b resolves %+v %v, want %s", got, ok, r2.ID)
	}
}

func TestRefreshKeepsLaterLocalTouch(t *testing.T) {
	a, b, st, clk := twoServices(t)
	ctx := context.Background()
	r, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("9"), IdleTimeout: time.Hour})
	if err := b.Refresh(ctx); err != nil { // full re-read
		t.Fatal(err)
	}
	local := t0.Add(30 * time.Minute)
	b.Touch(r.ID, local)
	// a changes the record (timeouts) with older activity.
	maxAge := 2 * time.Hour
	if _, err := a.SetTimeouts(ctx, r.ID, nil, &maxAge); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	got, ok := b.Get(r.ID)
	if !ok || got.MaxAge != maxAge || !got.LastActivityAt.Equal(local) {
		t.Fatalf("b has %+v %v; want the remote max age and the local activity %v", got, ok, local)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.recs[r.ID]; !s.LastActivityAt.Equal(local) || s.MaxAge != maxAge {
		t.Fatalf("stored after b's flush: %+v", s)
	}

	// A later remote touch wins over the older local one.
	remote := t0.Add(50 * time.Minute)
	a.Touch(r.ID, remote)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(r.ID); !got.LastActivityAt.Equal(remote) {
		t.Fatalf("b LastActivityAt = %v, want the remote %v", got.LastActivityAt, remote)
	}

	// b's sweep consults the store: the remote activity keeps it alive.
	clk.Set(t0.Add(80 * time.Minute)) // expired by b's old view (30m + 1h), not by the store's (50m + 1h)
	ended, err := b.Sweep(ctx)
	if err != nil || len(ended) != 0 {
		t.Fatalf("sweep ended %+v, %v; want nothing", ended, err)
	}
}

func TestSweepRereadsStoreBeforeEnding(t *testing.T) {
	a, b, _, clk := twoServices(t)
	ctx := context.Background()
	r, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("11"), IdleTimeout: time.Hour})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(59 * time.Minute))
	a.Touch(r.ID, clk.Now())
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(61 * time.Minute))
	ended, err := b.Sweep(ctx)
	if err != nil || len(ended) != 0 {
		t.Fatalf("b swept %+v %v although a recorded activity", ended, err)
	}
	clk.Set(t0.Add(2 * time.Hour))
	ended, err = b.Sweep(ctx)
	if err != nil || len(ended) != 1 || ended[0].EndedReason != binding.ReasonIdleExpired {
		t.Fatalf("sweep = %+v %v, want one idle-expired", ended, err)
	}
}

func TestFullRefreshDropsRecordsEndedElsewhere(t *testing.T) {
	a, b, _, _ := twoServices(t)
	ctx := context.Background()
	r1, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("21")})
	r2, _ := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: thread("22")})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(b.Active()) != 2 {
		t.Fatalf("b active = %d, want 2", len(b.Active()))
	}
	if _, err := a.Unbind(ctx, binding.UnbindInput{ID: r1.ID}); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	act := b.Active()
	if len(act) != 1 || act[0].ID != r2.ID {
		t.Fatalf("b active = %+v, want only %s", act, r2.ID)
	}
}

// A local write racing a refresh is never overwritten by the older read.
type slowStore struct {
	*fakeStore
	during func()
}

func (s *slowStore) Bindings(ctx context.Context) ([]binding.Record, error) {
	out, err := s.fakeStore.Bindings(ctx)
	if f := s.during; f != nil {
		s.during = nil
		f()
	}
	return out, err
}

func TestRefreshDoesNotUndoConcurrentLocalWrite(t *testing.T) {
	st := &slowStore{fakeStore: newFakeStore()}
	s := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clock.NewFake(t0), Log: zerolog.Nop()})
	ctx := context.Background()
	r, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: thread("31")})
	if err != nil {
		t.Fatal(err)
	}
	// The unbind lands after the refresh read the record as active.
	st.during = func() {
		if _, err := s.Unbind(ctx, binding.UnbindInput{ID: r.ID}); err != nil {
			t.Error(err)
		}
	}
	if err := s.Refresh(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.ResolveByConversation(thread("31")); ok {
		t.Fatal("a stale read brought an unbound binding back")
	}
}
