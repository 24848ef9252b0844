package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// waitFor re-checks cond each time signal fires, failing after within.
func waitFor(t *testing.T, signal <-chan struct{}, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-signal:
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// poll waits for a database condition (no notice exists for it), checking
// every few milliseconds, failing after within.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

func conv(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

func TestBindingChangesReachTheOtherProcessWithinASecond(t *testing.T) {
	sa, sb := twoProcesses(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	a := binding.New(binding.Options{}, binding.Deps{Store: sa, Clock: clk, Log: zerolog.Nop()})
	b := binding.New(binding.Options{}, binding.Deps{Store: sb, Clock: clk, Log: zerolog.Nop()})
	for _, s := range []*binding.Service{a, b} {
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	applied := make(chan struct{}, 64)
	listening := make(chan struct{}, 4)
	l := sb.NewListener(func(ctx context.Context, ids ...string) error {
		err := b.Refresh(ctx, ids...)
		select {
		case applied <- struct{}{}:
		default:
		}
		return err
	}, ListenerOptions{Resync: time.Hour, Retry: 10 * time.Millisecond})
	l.listening = func() { listening <- struct{}{} }
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	<-listening

	r, err := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s1", Conversation: conv("100")})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, applied, time.Second, "bind seen by b", func() bool {
		got, ok := b.ResolveByConversation(conv("100"))
		return ok && got.ID == r.ID
	})
	t.Logf("bind seen by the other process after %s", time.Since(start))

	later := clk.Now().Add(time.Minute)
	a.Touch(r.ID, later)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, applied, time.Second, "touch seen by b", func() bool {
		got, ok := b.Get(r.ID)
		return ok && got.LastActivityAt.Equal(later)
	})

	if _, err := a.Unbind(ctx, binding.UnbindInput{ID: r.ID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, applied, time.Second, "unbind seen by b", func() bool {
		_, ok := b.ResolveByConversation(conv("100"))
		return !ok
	})

	// Kill the listening connection: it reconnects and listens again.
	var pid int32
	if err := sa.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN `+BindingsChannel+`'`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	<-listening
	r2, err := a.Bind(ctx, binding.BindInput{TargetSessionKey: "s2", Conversation: conv("200")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, applied, time.Second, "bind seen after reconnect", func() bool {
		got, ok := b.ResolveByConversation(conv("200"))
		return ok && got.ID == r2.ID
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Changes made while nobody listened (their notices are lost) arrive
	// with the full re-read a listener starts with.
	r3, err := a.Bind(context.Background(), binding.BindInput{TargetSessionKey: "s3", Conversation: conv("300")})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { done <- l.Run(ctx2) }()
	waitFor(t, applied, time.Second, "bind made while not listening", func() bool {
		got, ok := b.ResolveByConversation(conv("300"))
		return ok && got.ID == r3.ID
	})
	cancel2()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTurnLocksSerialiseAKeyAcrossProcesses(t *testing.T) {
	sa, sb := twoProcesses(t)
	ctx := context.Background()
	la := sa.NewTurnLocker(TurnLockOptions{})
	defer la.Close()
	waiting := make(chan struct{}, 1)
	lb := sb.NewTurnLocker(TurnLockOptions{After: func(d time.Duration) <-chan time.Time {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return time.After(d)
	}})
	defer lb.Close()

	unlockA, err := la.Lock(ctx, "agent:main:discord:channel:1")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := lb.Lock(ctx, "agent:main:discord:channel:1")
		if err != nil {
			t.Error(err)
			return
		}
		got <- u
	}()
	// b found the key taken and waits to try again.
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not find the lock taken")
	}
	select {
	case <-got:
		t.Fatal("b took the lock a holds")
	default:
	}

	// Another key is not held up.
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	unlockOther, err := lb.Lock(octx, "agent:main:discord:channel:2")
	cancel()
	if err != nil {
		t.Fatalf("a different key waited: %v", err)
	}
	unlockOther()

	unlockA()
	select {
	case u := <-got:
		u()
	case <-time.After(5 * time.Second):
		t.Fatal("b did not get the lock after a released it")
	}
	// Released everywhere: a takes it again at once.
	octx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u, err := la.Lock(octx, "agent:main:discord:channel:1")
	if err != nil {
		t.Fatal(err)
	}
	u()
}

func TestOneLeaderAndTakeover(t *testing.T) {
	sa, sb := twoProcesses(t)
	const retry = 50 * time.Millisecond
	name := "test-leader-" + t.Name()
	var active, maxActive atomic.Int32
	led := make(chan string, 8)
	stopped := make(chan string, 8)
	work := func(who string) func(context.Context) error {
		return func(ctx context.Context) error {
			n := active.Add(1)
			for {
				m := maxActive.Load()
				if n <= m || maxActive.CompareAndSwap(m, n) {
					break
				}
			}
			led <- who
			<-ctx.Done()
			active.Add(-1)
			stopped <- who
			return nil
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelA()
	defer cancelB()
	var wg sync.WaitGroup
	wg.Go(func() { _ = sa.NewLeader(LeaderOptions{Name: name, Retry: retry}).Run(ctxA, work("a")) })
	first := <-led
	wg.Go(func() { _ = sb.NewLeader(LeaderOptions{Name: name, Retry: retry}).Run(ctxB, work("b")) })
	if first != "a" {
		t.Fatalf("first leader %q, want a", first)
	}
	// b is trying (its connection exists) but does not lead.
	poll(t, 5*time.Second, "b's attempts", func() bool {
		var n int
		_ = sa.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_try_advisory_lock%' AND pid <> $1`, leaderPID(t, sa, name)).Scan(&n)
		return n >= 1
	})
	select {
	case who := <-led:
		t.Fatalf("%s led while a did", who)
	default:
	}

	// a's lock connection dies: its work is cancelled, b takes over.
	start := time.Now()
	if _, err := sa.pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, leaderPID(t, sa, name)); err != nil {
		t.Fatal(err)
	}
	if who := <-stopped; who != "a" {
		t.Fatalf("stopped %q, want a", who)
	}
	select {
	case who := <-led:
		if who != "b" {
			t.Fatalf("new leader %q, want b", who)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nobody took over within 15s")
	}
	t.Logf("takeover after the leader's connection died: %s (retry %s)", time.Since(start), retry)

	// b stops (its process ends): a leads again.
	start = time.Now()
	cancelB()
	if who := <-stopped; who != "b" {
		t.Fatalf("stopped %q, want b", who)
	}
	select {
	case who := <-led:
		if who != "a" {
			t.Fatalf("new leader %q, want a", who)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a did not take over within 15s")
	}
	t.Logf("takeover after the leader stopped: %s", time.Since(start))
	cancelA()
	wg.Wait()
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d leaders ran at once", m)
	}
}

// leaderPID is the backend holding the named leader lock.
func leaderPID(t *testing.T, s *Store, name string) int32 {
	t.Helper()
	var pid int32
	err := s.pool.QueryRow(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, name).Scan(&pid)
	if err != nil {
		t.Fatalf("leader pid: %v", err)
	}
	return pid
}

func TestClaimDelivery(t *testing.T) {
	sa, sb := twoProcesses(t)
	ctx := context.Background()
	if ok, err := sa.ClaimDelivery(ctx, "missing", "a", time.Minute); err != nil || ok {
		t.Fatalf("claim of a missing delivery = %v, %v", ok, err)
	}
	rec := delivery.Record{Delivery: delivery.Delivery{ID: "d1", Target: conv("1"), Text: "x", Producer: delivery.Producer{Source: transcript.SourceJob}},
		State: delivery.StatePending, CreatedAt: time.Now()}
	if err := sa.PutDelivery(ctx, rec); err != nil {
		t.Fatal(err)
	}
	claim := func(s *Store, owner string, lease time.Duration) bool {
		t.Helper()
		ok, err := s.ClaimDelivery(ctx, "d1", owner, lease)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim(sa, "a", time.Minute) {
		t.Fatal("first claim refused")
	}
	if claim(sb, "b", time.Minute) {
		t.Fatal("b claimed under a's live lease")
	}
	rec.State = delivery.StateSent
	if err := sa.PutDelivery(ctx, rec); err != nil { // writes keep the claim
		t.Fatal(err)
	}
	if claim(sb, "b", time.Minute) || !claim(sa, "a", time.Microsecond) {
		t.Fatal("the claim did not survive a write, or a could not renew it")
	}
	poll(t, 5*time.Second, "a's microsecond lease runs out", func() bool { return claim(sb, "b", time.Minute) })
	if claim(sa, "a", time.Minute) {
		t.Fatal("a claimed under b's lease")
	}
}
