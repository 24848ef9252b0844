package bleveindex_test

import (
	"path/filepath"
	"testing"

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
