package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestTurnLocksDoNotStallOtherSessions: 40 sessions running slow turns at
// once (each holding its turn lock) do not hold up a 41st session of the
// same process. On the old code each held lock pinned one of the locker's
// 32 pooled connections and the 33rd Lock waited, with no timeout, for
// one of the slow turns to end.
func TestTurnLocksDoNotStallOtherSessions(t *testing.T) {
	s := openTemp(t)
	l := s.NewTurnLocker(TurnLockOptions{})
	defer l.Close()
	ctx := context.Background()
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	for i := range 40 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		u, err := l.Lock(lctx, fmt.Sprintf("agent:main:discord:channel:%d", i))
		cancel()
		if err != nil {
			t.Fatalf("lock %d while %d turns run: %v", i, i, err)
		}
		unlocks = append(unlocks, u)
	}
	var conns int
	if err := s.pool.QueryRow(ctx, `SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	if conns != 1 {
		t.Errorf("40 turn locks are held on %d connections, want 1", conns)
	}
}

// TestTurnLockOneHolderPerKeyInProcess: advisory locks are re-entrant on
// their connection, so the locker itself keeps a second Lock of a held
// key waiting until the first is released.
func TestTurnLockOneHolderPerKeyInProcess(t *testing.T) {
	s := openTemp(t)
	l := s.NewTurnLocker(TurnLockOptions{})
	defer l.Close()
	ctx := context.Background()
	u, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "k"); err == nil {
		t.Fatal("a second Lock of a held key succeeded")
	}
	got := make(chan func(), 1)
	go func() {
		u2, err := l.Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- u2
	}()
	u()
	u() // a second unlock is harmless
	select {
	case u2 := <-got:
		if u2 != nil {
			u2()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Lock did not get the key after it was released")
	}
}
