package bolt

import (
	"context"
	"testing"
	"time"

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
