package memorytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/memory"
)

// BenchSize is the corpus of BenchmarkSearch: docs entries over convs
// conversations, searched with a view of visible conversations.
type BenchSize struct{ Docs, Convs, Visible int }

// word is the i-th word of a synthetic vocabulary.
func word(i int) string { return fmt.Sprintf("w%dx", i) }

// Fill writes size.Docs documents of 12 words each (Zipf-distributed over a
// 20000-word vocabulary, so a few words are common and most are rare) into
// idx, in batches, and returns the session keys of the conversations.
func Fill(b testing.TB, idx memory.Index, size BenchSize) []string {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, 19999)
	keys := make([]string, size.Convs)
	for i := range keys {
		keys[i] = Channel(fmt.Sprintf("c%d", i))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 5000
	ups := make([]memory.Update, 0, batch)
	for i := range size.Docs {
		ws := make([]string, 12)
		for j := range ws {
			ws[j] = word(int(z.Uint64()))
		}
		ups = append(ups, memory.Update{Doc: memory.Doc{Key: keys[i%size.Convs], Seq: uint64(i/size.Convs + 1), Role: "user", Author: "alice",
			Text: strings.Join(ws, " "), At: t0.Add(time.Duration(i) * time.Second), MessageID: fmt.Sprint(i)}})
		if len(ups) == batch || i == size.Docs-1 {
			if err := idx.Apply(context.Background(), ups); err != nil {
				b.Fatal(err)
			}
			ups = ups[:0]
		}
	}
	return keys
}

// BenchmarkSearch measures Index.Search over a view of size.Visible
// conversations, one sub-benchmark per kind of query (a word in 70% of the
// entries, like "the" that an analyzer keeps; a frequent word; a rare word;
// two words), each reporting its p50 and p99 latencies.
func BenchmarkSearch(b *testing.B, idx memory.Index, keys []string, size BenchSize) {
	view := keys[:size.Visible]
	for _, q := range []struct{ name, text string }{
		{"very-common", word(1)}, {"frequent", word(50)}, {"rare", word(2000)}, {"two-words", word(50) + " " + word(400)},
	} {
		b.Run(q.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := idx.Search(context.Background(), memory.Query{Text: q.text, Keys: view, Limit: 10}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
