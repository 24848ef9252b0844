package bleveindex_test

import (
	"path/filepath"
	"testing"

	recall "github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/memory/memorytest"
	"github.com/agentbot/agentbot/memory/bleveindex"
	"github.com/agentbot/agentbot/store/bolt"
)

func open(t *testing.T, path string) memorytest.Pair {
	t.Helper()
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bleveindex.Open(bleveindex.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idx.Close(); _ = st.Close() })
	return memorytest.Pair{Store: st, Index: idx}
}

func TestConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memorytest.Pair {
		return open(t, filepath.Join(t.TempDir(), "bot.db"))
	}, memorytest.WithReopen(func(t *testing.T, p memorytest.Pair) memorytest.Pair {
		st := p.Store.(*bolt.Store)
		path := st.Path()
		_ = p.Index.(*bleveindex.Index).Close()
		_ = st.Close()
		return open(t, path)
	}))
}

// TestSearchBeyondTheWindow: when the words' best matches are mostly
// outside the view, the view's own matches are still found (the search
// falls back to filtering in the index), and only them.
func TestSearchBeyondTheWindow(t *testing.T) {
	idx, err := bleveindex.Open(filepath.Join(t.TempDir(), "bot.db.recall"))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	hidden, shown := memorytest.Channel("hidden"), memorytest.Channel("shown")
	var ups []recall.Update
	for i := range 5100 { // more matches than the index fetches to filter itself
		// The hidden conversation's documents score higher (shorter).
		ups = append(ups, recall.Update{Doc: recall.Doc{Key: hidden, Seq: uint64(i + 1), Text: "apple", MessageID: "h"}})
	}
	for i := range 3 {
		ups = append(ups, recall.Update{Doc: recall.Doc{Key: shown, Seq: uint64(i + 1), Text: "apple pie with cream", MessageID: "s"}})
	}
	if err := idx.Apply(t.Context(), ups); err != nil {
		t.Fatal(err)
	}
	hits, err := idx.Search(t.Context(), recall.Query{Text: "apple", Keys: []string{shown}, Limit: 5})
	if err != nil || len(hits) != 3 {
		t.Fatalf("search = %d hits, %v; want the 3 shown", len(hits), err)
	}
	for _, h := range hits {
		if h.Doc.Key != shown {
			t.Fatalf("hit %s outside the view", h.Doc.ID())
		}
	}
}
