package postgres

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// Benchmarks compare PostgreSQL with bbolt in the same shapes (sub-benchmark
// store=postgres|bolt), and show routing is still served from memory:
//
//	BenchmarkStoreAppend       transcript Append, 1 and 32 concurrent appenders
//	BenchmarkBindUnbind        binding.Service Bind then Unbind (two writes)
//	BenchmarkResolveByConversation100k
//	                           same target as core/binding's (<= 300 ns/op,
//	                           0 allocs/op) with the service loaded from the store
//
// PostgreSQL runs on pgtest's private server (durability off: fsync and
// synchronous_commit; figures on a production server with synchronous
// commit are bounded by its WAL flush) or on $AGENTBOT_TEST_DSN.
//
// Run: go test -run '^$' -bench . -benchtime=2s ./store/postgres

// benchStore is what the benchmarks use of either store.
type benchStore interface {
	binding.Store
	Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, bool, error)
	Close() error
}

type benchBackend struct {
	name string
	open func(b *testing.B) benchStore
}

var benchBackends = []benchBackend{
	{"postgres", func(b *testing.B) benchStore {
		s, err := Open(context.Background(), pgtest.DSN(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"bolt", func(b *testing.B) benchStore {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "bot.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

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

// parallel runs op(i) for i in 1..b.N from workers goroutines.
func parallel(b *testing.B, workers int, op func(worker, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if err := op(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}

func BenchmarkStoreAppend(b *testing.B) {
	for _, be := range benchBackends {
		for _, appenders := range []int{1, 32} {
			b.Run(fmt.Sprintf("store=%s/appenders=%d", be.name, appenders), func(b *testing.B) {
				s := be.open(b)
				defer s.Close()
				ctx := context.Background()
				parallel(b, appenders, func(w, i int) error {
					_, _, err := s.Append(ctx, fmt.Sprintf("agent:main:discord:channel:%d", w), benchEntry(i))
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

func BenchmarkBindUnbind(b *testing.B) {
	for _, be := range benchBackends {
		for _, binders := range []int{1, 32} {
			b.Run(fmt.Sprintf("store=%s/binders=%d", be.name, binders), func(b *testing.B) {
				s := be.open(b)
				defer s.Close()
				ctx := context.Background()
				svc := binding.New(binding.Options{}, binding.Deps{Store: s, Clock: clock.Real{}, Log: zerolog.Nop()})
				parallel(b, binders, func(_, i int) error {
					rec, err := svc.Bind(ctx, binding.BindInput{TargetSessionKey: "agent:main:subagent:" + strconv.Itoa(i), TargetKind: binding.KindSubagent,
						Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: strconv.Itoa(1_300_000_000_000_000_000 + i)}})
					if err != nil {
						return err
					}
					_, err = svc.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: "bench"})
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bind+unbind/s")
			})
		}
	}
}

func BenchmarkResolveByConversation100k(b *testing.B) {
	const n = 100_000
	for _, be := range benchBackends {
		b.Run("store="+be.name, func(b *testing.B) {
			s := be.open(b)
			defer s.Close()
			ctx := context.Background()
			at := time.Now().Add(-time.Minute)
			recs := make([]binding.Record, n)
			refs := make([]binding.ConversationRef, n)
			for i := range recs {
				id := fmt.Sprintf("bnd-%08d", i)
				refs[i] = binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: strconv.Itoa(1_000_000_000_000_000 + i)}
				recs[i] = binding.Record{ID: id, TargetSessionKey: "agent:main:subagent:" + id, TargetKind: binding.KindSubagent,
					Conversation: refs[i], Status: binding.StatusActive, AgentID: "main", BoundBy: "system",
					BoundAt: at, LastActivityAt: at, IdleTimeout: 24 * time.Hour}
			}
			start := time.Now()
			if err := s.PutBindings(ctx, recs...); err != nil {
				b.Fatal(err)
			}
			put := time.Since(start)
			svc := binding.New(binding.Options{}, binding.Deps{Store: s, Clock: clock.Real{}, Log: zerolog.Nop()})
			start = time.Now()
			if err := svc.Load(ctx); err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: PutBindings of %d in %v, Load in %v", be.name, n, put.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, ok := svc.ResolveByConversation(refs[i%n]); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}
