package bleveindex_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/memory/memorytest"
	"github.com/agentbot/agentbot/memory/bleveindex"
)

// benchSize: AGENTBOT_RECALL_BENCH_DOCS entries (default 100000) in 5000
// conversations, a view of 200.
func benchSize() memorytest.BenchSize {
	n, err := strconv.Atoi(os.Getenv("AGENTBOT_RECALL_BENCH_DOCS"))
	if err != nil || n <= 0 {
		n = 100_000
	}
	return memorytest.BenchSize{Docs: n, Convs: 5000, Visible: 200}
}

func BenchmarkRecallSearch(b *testing.B) {
	size := benchSize()
	dir := filepath.Join(b.TempDir(), "bot.db.recall")
	idx, err := bleveindex.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer idx.Close()
	start := time.Now()
	keys := memorytest.Fill(b, idx, size)
	st, err := idx.Stats(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("indexed %d documents in %s: %d bytes on disk", st.Docs, time.Since(start).Round(time.Millisecond), st.Bytes)
	memorytest.BenchmarkSearch(b, idx, keys, size)
}
