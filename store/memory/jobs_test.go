package memory_test

import (
	"testing"

	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/scheduler/schedulertest"
	"github.com/agentbot/agentbot/store/memory"
)

func TestSchedulerStore(t *testing.T) {
	schedulertest.Run(t, func(*testing.T) scheduler.Store { return memory.New() })
}
