package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// BenchmarkStoreGrowth1MTurns writes what 1M turns leave in the store
// (per turn: the user's entry, the reply's entry and the reply's outbox
// record; 1,000 conversations; 10,000 turns a simulated day, so 100 days)
// twice: keeping every delivery, and pruning finished deliveries older
// than 30 days once a simulated day, as the bot does hourly. It reports
// the file size and the bytes in use (file minus free pages) of each. Not
// part of make test (it writes ~1 GB):
//
//	go test -run '^$' -bench StoreGrowth1MTurns -benchtime 1x -timeout 30m ./store/bolt/
func BenchmarkStoreGrowth1MTurns(b *testing.B) {
	turns := 1_000_000
	if testing.Short() {
		turns = 20_000
	}
	const (
		convs      = 1000
		perDay     = 10_000
		retainDays = 30
	)
	for _, retain := range []bool{false, true} {
		name := "retention=off"
		if retain {
			name = fmt.Sprintf("retention=%dd", retainDays)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				s, err := Open(filepath.Join(b.TempDir(), "bot.db"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				pruned := 0
				for start := 0; start < turns; start += perDay {
					// One transaction per simulated day (a bulk load; the bot commits per turn).
					if err := s.db.Update(func(tx *bbolt.Tx) error {
						for i := start; i < min(start+perDay, turns); i++ {
							at := day0.Add(time.Duration(i) * (24 * time.Hour / perDay)) // 8.64 s apart
							key := fmt.Sprintf("agent:main:discord:channel:%d", 1_300_000_000_000_000_000+i%convs)
							user := transcript.Entry{Role: transcript.RoleUser, Author: "someone",
								Text:       fmt.Sprintf("question number %d: a typical short chat message with a few words", i),
								MessageIDs: []string{fmt.Sprintf("14%017d", 2*i)}, Source: transcript.SourceUser, At: at}
							if _, _, err := appendTx(tx, key, transcript.ForStore(key, user)); err != nil {
								return err
							}
							id := fmt.Sprintf("reply:%s:14%017d", key, 2*i)
							reply := transcript.Entry{Role: transcript.RoleAssistant, Author: "Assistant",
								Text:       fmt.Sprintf("answer number %d: a typical reply of a sentence or two, somewhat longer than the question was", i),
								MessageIDs: []string{fmt.Sprintf("14%017d", 2*i+1)}, Source: transcript.SourceTurn, DeliveryID: id, At: at}
							if _, _, err := appendTx(tx, key, transcript.ForStore(key, reply)); err != nil {
								return err
							}
							rec := delivery.Record{Delivery: delivery.Delivery{ID: id, Text: reply.Text,
								Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}},
								State: delivery.StateDelivered, MessageIDs: reply.MessageIDs, CreatedAt: at, UpdatedAt: at}
							if err := putDeliveryTx(tx, rec); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					if retain {
						now := day0.Add(time.Duration(start+perDay) * (24 * time.Hour / perDay))
						n, err := s.PruneDeliveries(ctx, now.Add(-retainDays*24*time.Hour), false)
						if err != nil {
							b.Fatal(err)
						}
						pruned += n.Rows
					}
				}
				fi, err := os.Stat(s.path)
				if err != nil {
					b.Fatal(err)
				}
				st := s.db.Stats()
				free := int64(st.FreePageN+st.PendingPageN) * int64(s.db.Info().PageSize)
				b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
				b.ReportMetric(float64(fi.Size()-free)/(1<<20), "in-use-MiB")
				b.ReportMetric(float64(pruned), "pruned")
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
