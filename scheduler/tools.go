package scheduler

import (
	"context"
	"fmt"

	"github.com/agentbot/agentbot/core/delivery"
)

// ToolHealth tells which of an agent's tool servers are not up (the MCP
// hub). A run of that agent then goes without their tools: it is not a
// failure (the model may manage without), but the run's record says so.
type ToolHealth interface {
	// Unavailable lists the agent's servers that are not up, one line each
	// ("name: state: last error"), after waiting (bounded) for servers
	// still starting.
	Unavailable(ctx context.Context, agentID string) []string
}

// ReasonToolsUnavailable is the diagnostic reason of a run whose agent had
// a tool server down.
const ReasonToolsUnavailable = "tools-unavailable"

// noteTools records with r every tool server of j's agent that is not up
// as the run starts.
func (s *Scheduler) noteTools(ctx context.Context, j Job, r *Run) {
	if s.d.Tools == nil {
		return
	}
	for _, line := range s.d.Tools.Unavailable(ctx, j.AgentID) {
		r.Diagnostics = append(r.Diagnostics, Diagnostic{Level: delivery.DiagnosticWarn, Reason: ReasonToolsUnavailable,
			Detail: fmt.Sprintf("MCP server %s; the run had none of its tools", line)})
	}
}
