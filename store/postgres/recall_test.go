package postgres

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/memory/memorytest"
)

func TestRecallConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memorytest.Pair {
		s := openTemp(t)
		return memorytest.Pair{Store: s, Index: s.RecallIndex()}
	}, memorytest.WithReopen(func(t *testing.T, p memorytest.Pair) memorytest.Pair {
		s := reopen(t, p.Store.(*Store))
		return memorytest.Pair{Store: s, Index: s.RecallIndex()}
	}))
}

// BenchmarkRecallSearch: AGENTBOT_RECALL_BENCH_DOCS entries (default
// 100000) in 5000 conversations, a view of 200.
func BenchmarkRecallSearch(b *testing.B) {
	n, err := strconv.Atoi(os.Getenv("AGENTBOT_RECALL_BENCH_DOCS"))
	if err != nil || n <= 0 {
		n = 100_000
	}
	size := memorytest.BenchSize{Docs: n, Convs: 5000, Visible: 200}
	s := openTemp(b)
	idx := s.RecallIndex()
	start := time.Now()
	keys := memorytest.Fill(b, idx, size)
	if _, err := s.pool.Exec(b.Context(), `ANALYZE memory_docs`); err != nil {
		b.Fatal(err)
	}
	st, err := idx.Stats(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("indexed %d documents in %s: %d bytes", st.Docs, time.Since(start).Round(time.Millisecond), st.Bytes)
	memorytest.BenchmarkSearch(b, idx, keys, size)
}
