package postgres

import (
	"testing"

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
