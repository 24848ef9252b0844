package bolt

import (
	"testing"

	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/scheduler/schedulertest"
)

func TestSchedulerStore(t *testing.T) {
	schedulertest.Run(t,
		func(t *testing.T) scheduler.Store { return openTemp(t) },
		schedulertest.WithReopen(func(t *testing.T, s scheduler.Store) scheduler.Store { return reopen(t, s.(*Store)) }))
}
