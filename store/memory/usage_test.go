package memory_test

import (
	"testing"

	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/core/usage/usagetest"
	"github.com/agentbot/agentbot/store/memory"
)

func TestUsageStore(t *testing.T) {
	usagetest.Run(t, func(*testing.T) usage.Store { return memory.NewUsage() })
	t.Run("Store", func(t *testing.T) { usagetest.Run(t, func(*testing.T) usage.Store { return memory.New() }) })
}
