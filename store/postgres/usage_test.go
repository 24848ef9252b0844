package postgres

import (
	"testing"

	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/core/usage/usagetest"
)

func TestUsageStore(t *testing.T) {
	usagetest.Run(t,
		func(t *testing.T) usage.Store { return openTemp(t) },
		usagetest.WithReopen(func(t *testing.T, s usage.Store) usage.Store { return reopen(t, s.(*Store)) }))
}
