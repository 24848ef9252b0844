package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// Benchmarks carry the performance targets (tests never assert speed):
//
//	BenchmarkAppend/appenders=32      >= 5x the entries/s of appenders=1 (group commit)
//	BenchmarkTail50/entries=1000000   <= 2x the time of entries=1000
//	BenchmarkOpenLoad100kBindings     < 1 s and < 64 MiB heap for the records
//
// Run: go test -run '^$' -bench . -benchtime=2s ./store/bolt

func benchEntry(i int) transcript.Entry {
	return transcript.Entry{
		Role:       transcript.RoleAssistant,
		Author:     "bot",
		Text:       fmt.Sprintf("reply number %d: a typical short chat message with a few words in it", i),
		MessageIDs: []string{fmt.Sprintf("13%017d", i)},
		Source:     transcript.SourceTurn,
		DeliveryID: fmt.Sprintf("dlv-%012d", i),
		At:         time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 32} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			s := openTemp(b)
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for g := range appenders {
				wg.Go(func() {
					key := fmt.Sprintf("agent:main:discord:channel:%d", g)
					for {
						i := int(next.Add(1))
						if i > b.N {
							return
						}
						e := benchEntry(i)
						if _, _, err := s.Append(ctx, key, e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// bulkAppend writes n entries to session key through the same appendTx as
// Append, in large transactions, to build big sessions quickly.
func bulkAppend(tb testing.TB, s *Store, key string, n int) {
	tb.Helper()
	const perTx = 50_000
	for done := 0; done < n; {
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i := 0; i < perTx && done < n; i++ {
				done++
				e := benchEntry(done)
				e.SessionKey = key
				if _, _, err := appendTx(tx, key, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func BenchmarkTail50(b *testing.B) {
	for _, size := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", size), func(b *testing.B) {
			s := openTemp(b)
			start := time.Now()
			bulkAppend(b, s, "big", size)
			// A few neighbours so the session is not alone in its bucket.
			bulkAppend(b, s, "a-small", 10)
			bulkAppend(b, s, "z-small", 10)
			b.Logf("built %d entries in %v", size, time.Since(start).Round(time.Millisecond))
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				es, err := s.Tail(ctx, "big", 50)
				if err != nil || len(es) != 50 || es[49].Seq != uint64(size) {
					b.Fatalf("Tail: %d entries, err %v", len(es), err)
				}
			}
		})
	}
}

func benchBinding(i int) binding.Record {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	id := fmt.Sprintf("bnd-%08d", i)
	return binding.Record{
		ID:               id,
		TargetSessionKey: "agent:main:subagent:" + id,
		TargetKind:       binding.KindSubagent,
		Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default",
			ConversationID: fmt.Sprintf("13%017d", i), ParentConversationID: "1300000000000000000"},
		Status:         binding.StatusActive,
		AgentID:        "main",
		Label:          fmt.Sprintf("worker %d", i),
		BoundBy:        "system",
		BoundAt:        at,
		LastActivityAt: at,
		IdleTimeout:    24 * time.Hour,
	}
}

func BenchmarkOpenLoad100kBindings(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "bot.db")
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	batch := make([]binding.Record, 0, 10_000)
	for i := range n {
		batch = append(batch, benchBinding(i))
		if len(batch) == cap(batch) {
			if err := s.PutBindings(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	s.Close()

	var heap uint64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()

		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		recs, err := s.Bindings(ctx)
		if err != nil || len(recs) != n {
			b.Fatalf("Bindings: %d records, err %v", len(recs), err)
		}
		s.Close()

		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(recs)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "heap-MiB")
}
