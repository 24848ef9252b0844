package memory_test

import (
	"testing"

	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/internal/procs/procstest"
	"github.com/agentbot/agentbot/store/memory"
)

func TestProcessStore(t *testing.T) {
	procstest.Run(t, func(*testing.T) procs.Store { return memory.NewProcesses() })
}
