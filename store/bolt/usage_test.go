package bolt

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/core/usage/usagetest"
)

func TestUsageStore(t *testing.T) {
	usagetest.Run(t,
		func(t *testing.T) usage.Store { return openTemp(t) },
		usagetest.WithReopen(func(t *testing.T, s usage.Store) usage.Store { return reopen(t, s.(*Store)) }))
}

// BenchmarkAddUsage is the usage write a model call adds on the reply
// path: alone, one transaction (one fsync); with concurrent callers (many
// turns at once) the writes share the store's group commits.
func BenchmarkAddUsage(b *testing.B) {
	r := usage.Record{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Model: "default", Agent: "main", User: "42", Place: "900",
		SessionKey: "agent:main:discord:channel:1000", Run: "turn:1", Input: 1200, Output: 300}
	b.Run("alone", func(b *testing.B) {
		s := openTemp(b)
		for i := 0; i < b.N; i++ {
			if err := s.AddUsage(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrent", func(b *testing.B) {
		s := openTemp(b)
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.AddUsage(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkReplyWriteCommits is the reply path's store writes for one
// model call, in commits (fsyncs) per turn: the reply entry carrying its
// call's usage record (one transaction) against the entry and a usage
// write of its own (two). Run: go test -run '^$' -bench ReplyWriteCommits ./store/bolt
func BenchmarkReplyWriteCommits(b *testing.B) {
	r := usage.Record{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Model: "default", Agent: "main", User: "42", Place: "900",
		SessionKey: "agent:main:discord:channel:1000", Run: "turn:1", Input: 1200, Output: 300}
	for _, tc := range []struct {
		name  string
		write func(s *Store, e transcript.Entry) error
	}{
		{"entry-carries-usage", func(s *Store, e transcript.Entry) error {
			e.Calls = []usage.Record{r}
			_, _, err := s.Append(context.Background(), r.SessionKey, e)
			return err
		}},
		{"usage-own-write", func(s *Store, e transcript.Entry) error {
			if err := s.AddUsage(context.Background(), r); err != nil {
				return err
			}
			_, _, err := s.Append(context.Background(), r.SessionKey, e)
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := openTemp(b)
			before := txID(b, s)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := tc.write(s, benchEntry(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(txID(b, s)-before)/float64(b.N), "commits/turn")
		})
	}
}

// txID is the store's last committed transaction id: bbolt adds one per
// commit (each one fsync'd).
func txID(tb testing.TB, s *Store) int {
	var id int
	if err := s.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		tb.Fatal(err)
	}
	return id
}
