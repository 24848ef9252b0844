package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// Two *Store values on one database stand for two bot processes: they share
// nothing but PostgreSQL (separate pools, separate connections).
func twoProcesses(t *testing.T) (*Store, *Store) {
	t.Helper()
	dsn := pgtest.DSN(t)
	return openDSN(t, dsn), openDSN(t, dsn)
}

func TestCrossProcessAppend(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	const perWorker, workersPerStore = 40, 4
	key := "agent:main:discord:channel:1"
	type res struct {
		id      string
		seq     uint64
		existed bool
	}
	var (
		mu      sync.Mutex
		results []res
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for w := range 2 * workersPerStore {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			<-start
			for i := range perWorker {
				// Workers w and w^1 run in different processes and race
				// on the same delivery ids.
				id := fmt.Sprintf("d-%d-%d", w/2, i)
				e := transcript.Entry{Role: transcript.RoleAssistant, Text: id, DeliveryID: id,
					MessageIDs: []string{"m-" + id}, Source: transcript.SourceJob, At: time.Now()}
				got, existed, err := s.Append(ctx, key, e)
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				if got.DeliveryID != id || got.Text != id {
					t.Errorf("Append(%s) returned %+v", id, got)
				}
				mu.Lock()
				results = append(results, res{id, got.Seq, existed})
				mu.Unlock()
			}
			// Entries without a delivery id are never deduped.
			if _, existed, err := s.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Text: "plain"}); err != nil || existed {
				t.Errorf("plain Append: existed=%v err=%v", existed, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	unique := workersPerStore * perWorker
	want := unique + 2*workersPerStore
	for name, s := range map[string]*Store{"a": a, "b": b} {
		es, err := s.Range(ctx, key, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		seen := map[string]uint64{}
		for _, e := range es {
			got = append(got, e.Seq)
			if e.DeliveryID == "" {
				continue
			}
			if prev, dup := seen[e.DeliveryID]; dup {
				t.Fatalf("store %s: delivery %s stored twice (seq %d and %d)", name, e.DeliveryID, prev, e.Seq)
			}
			seen[e.DeliveryID] = e.Seq
		}
		wantSeqs := make([]uint64, want)
		for i := range wantSeqs {
			wantSeqs[i] = uint64(i + 1)
		}
		if !slices.Equal(got, wantSeqs) {
			t.Fatalf("store %s: seqs not dense 1..%d: %v", name, want, got)
		}
		if len(seen) != unique {
			t.Fatalf("store %s: %d delivery ids stored, want %d", name, len(seen), unique)
		}
		existed := 0
		for _, r := range results {
			if r.existed {
				existed++
			}
			if seen[r.id] != r.seq {
				t.Fatalf("delivery %s: Append returned seq %d, stored at %d", r.id, r.seq, seen[r.id])
			}
		}
		if existed != unique {
			t.Fatalf("%d appends reported existed, want %d (one loser per delivery id)", existed, unique)
		}
	}
	// The message-id index agrees across processes too.
	e, ok, err := b.ByMessageID(ctx, key, "m-d-0-0")
	if err != nil || !ok || e.DeliveryID != "d-0-0" {
		t.Fatalf("ByMessageID from the other process: %+v ok=%v err=%v", e, ok, err)
	}
}

func TestCrossProcessClaimInstant(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const instants, claimersPerStore = 20, 4
	wins := make([]int, instants)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for c := range 2 * claimersPerStore {
		s := a
		if c%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for i := range instants {
				ok, err := s.ClaimInstant(ctx, "job-1", base.Add(time.Duration(i)*time.Minute))
				if err != nil {
					t.Errorf("ClaimInstant: %v", err)
					return
				}
				if ok {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, n := range wins {
		// A claimer that falls behind may find a later instant already
		// claimed (the ledger is a high-water mark), so an instant may have
		// no winner here; it must never have two.
		if n > 1 {
			t.Fatalf("instant %d claimed %d times", i, n)
		}
	}
	if wins[instants-1] != 1 {
		t.Fatalf("newest instant claimed %d times, want 1", wins[instants-1])
	}
	// One instant, all claimers released together: exactly one winner.
	for round := range 10 {
		at := base.Add(time.Hour + time.Duration(round)*time.Minute)
		start := make(chan struct{})
		var won int
		for c := range 2 * claimersPerStore {
			s := a
			if c%2 == 1 {
				s = b
			}
			wg.Go(func() {
				<-start
				ok, err := s.ClaimInstant(ctx, "job-2", at)
				if err != nil {
					t.Errorf("ClaimInstant: %v", err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d claims won, want exactly 1", round, won)
		}
	}
}
