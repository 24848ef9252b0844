package postgres

import (
	"testing"

	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/internal/procs/procstest"
)

func TestProcessStore(t *testing.T) {
	procstest.Run(t,
		func(t *testing.T) procs.Store { return openTemp(t) },
		procstest.WithReopen(func(t *testing.T, s procs.Store) procs.Store { return reopen(t, s.(*Store)) }))
}
