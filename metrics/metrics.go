// Package metrics defines the bot's Prometheus collectors in one place.
//
// Invariants: collectors are registered on the registry passed to New,
// never on the global default registry; label values are bounded sets
// (outcomes, reasons, error codes), never ids or user text.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bot's collectors. A nil *Metrics records nothing.
type Metrics struct {
	Deliveries      *prometheus.CounterVec // outcome, source
	RouterDecisions *prometheus.CounterVec // mode, reason
	RESTErrors      *prometheus.CounterVec // code
	RateLimited     prometheus.Counter
	ActiveBindings  prometheus.GaugeFunc
	TurnSeconds     prometheus.Histogram
	Inbound         *prometheus.CounterVec // decision
	Rule1Exceptions *prometheus.CounterVec // reason
	MCPUp           *prometheus.GaugeVec   // server
	MCPRestarts     *prometheus.CounterVec // server
	MCPToolCalls    *prometheus.CounterVec // server, outcome
	MCPToolSeconds  *prometheus.HistogramVec
	ModelCalls      *prometheus.CounterVec // model, outcome (ok or the error kind)
	ModelFallbacks  *prometheus.CounterVec // from, to
	ModelBreakers   *prometheus.GaugeVec   // model, state (1 for the current state)
	Tokens          *prometheus.CounterVec // model, agent, kind (input, output, cached)
	// ACP agents' commands (terminal/*).
	CommandsStarted prometheus.Counter
	CommandsKilled  *prometheus.CounterVec // reason: killed, timeout
	CommandsRunning prometheus.Gauge
	AuditDiffs      *prometheus.GaugeVec // kind
}

// New creates and registers the collectors; activeBindings reports the gauge.
func New(reg prometheus.Registerer, activeBindings func() float64) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_deliveries_total",
			Help: "Outbound deliveries by outcome (delivered, failed) and producer source."}, []string{"outcome", "source"}),
		RouterDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_router_decisions_total",
			Help: "Completion routing decisions by mode and reason."}, []string{"mode", "reason"}),
		RESTErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_discord_rest_errors_total",
			Help: "Discord REST errors by JSON error code (or HTTP status when there is none)."}, []string{"code"}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbot_discord_rate_limited_total",
			Help: "Discord 429 responses seen."}),
		ActiveBindings: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbot_active_bindings",
			Help: "Active conversation bindings."}, activeBindings),
		TurnSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbot_turn_seconds",
			Help: "Turn latency from dequeue to confirmed reply.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		Inbound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_inbound_messages_total",
			Help: "Inbound messages by decision (routed, ignored-*)."}, []string{"decision"}),
		Rule1Exceptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_rule1_exceptions_total",
			Help: "Deliveries displayed without a transcript entry (Rule 1 exceptions, warn diagnostics) by reason."}, []string{"reason"}),
		MCPUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbot_mcp_server_up",
			Help: "1 while an MCP server's session is up (its tools offered), 0 while it is down."}, []string{"server"}),
		MCPRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_mcp_server_restarts_total",
			Help: "MCP server failed starts and crashes (each followed by a restart)."}, []string{"server"}),
		MCPToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_mcp_tool_calls_total",
			Help: "MCP tool calls by server and outcome (ok, tool-error, error, timeout, unavailable, ...)."}, []string{"server", "outcome"}),
		MCPToolSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbot_mcp_tool_call_seconds",
			Help: "MCP tool call latency.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"server"}),
		ModelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_model_calls_total",
			Help: "Model calls by models entry and outcome (ok, or the failure kind: rate-limit, server, timeout, auth, bad-request, canceled, unknown)."}, []string{"model", "outcome"}),
		ModelFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_model_fallbacks_total",
			Help: "Model calls handed on to a fallback model, by the model that failed (or was skipped) and the one tried next."}, []string{"from", "to"}),
		ModelBreakers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbot_model_breaker",
			Help: "1 for a model's circuit breaker's current state (closed, open, half-open), 0 for the others."}, []string{"model", "state"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_tokens_total",
			Help: "Model tokens as the providers report them, by models entry, agent and kind (input, output, cached)."}, []string{"model", "agent", "kind"}),
		CommandsStarted: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbot_acp_commands_started_total",
			Help: "Commands ACP agents started (terminal/create)."}),
		CommandsKilled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbot_acp_commands_killed_total",
			Help: "Commands the bot killed, by reason (killed: kill, release, /stop, session end; timeout: commandTimeout)."}, []string{"reason"}),
		CommandsRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbot_acp_commands_running",
			Help: "Commands of ACP agents running now."}),
		AuditDiffs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbot_audit_differences",
			Help: "Differences between the transcripts and what the chats display, found by the latest periodic audit (audit.every), by kind."}, []string{"kind"}),
	}
	reg.MustRegister(m.Deliveries, m.RouterDecisions, m.RESTErrors, m.RateLimited, m.ActiveBindings, m.TurnSeconds, m.Inbound, m.Rule1Exceptions,
		m.MCPUp, m.MCPRestarts, m.MCPToolCalls, m.MCPToolSeconds, m.CommandsStarted, m.CommandsKilled, m.CommandsRunning,
		m.ModelCalls, m.ModelFallbacks, m.ModelBreakers, m.Tokens, m.AuditDiffs)
	return m
}

// AuditDifferences sets how many differences of kind the latest audit found.
func (m *Metrics) AuditDifferences(kind string, n int) {
	if m != nil {
		m.AuditDiffs.WithLabelValues(kind).Set(float64(n))
	}
}

// Delivery counts a finished delivery.
func (m *Metrics) Delivery(outcome, source string) {
	if m != nil {
		m.Deliveries.WithLabelValues(outcome, source).Inc()
	}
}

// Route counts a router decision.
func (m *Metrics) Route(mode, reason string) {
	if m != nil {
		m.RouterDecisions.WithLabelValues(mode, reason).Inc()
	}
}

// RESTError counts a Discord error code; 429 also counts as rate limited.
func (m *Metrics) RESTError(code int, status int) {
	if m == nil {
		return
	}
	if status == 429 {
		m.RateLimited.Inc()
	}
	label := strconv.Itoa(code)
	if code == 0 {
		label = "http-" + strconv.Itoa(status)
	}
	m.RESTErrors.WithLabelValues(label).Inc()
}

// InboundDecision counts what happened to an inbound message.
func (m *Metrics) InboundDecision(d string) {
	if m != nil {
		m.Inbound.WithLabelValues(d).Inc()
	}
}

// Turn observes a turn's latency in seconds.
func (m *Metrics) Turn(seconds float64) {
	if m != nil {
		m.TurnSeconds.Observe(seconds)
	}
}

// Rule1Exception counts a delivery displayed without a transcript entry,
// by its reason (bound-to-other-agent, native-only).
func (m *Metrics) Rule1Exception(reason string) {
	if m != nil {
		m.Rule1Exceptions.WithLabelValues(reason).Inc()
	}
}

// MCPServerUp records whether an MCP server's session is up.
func (m *Metrics) MCPServerUp(server string, up bool) {
	if m != nil {
		v := 0.0
		if up {
			v = 1
		}
		m.MCPUp.WithLabelValues(server).Set(v)
	}
}

// MCPRestart counts an MCP server's failed start or crash.
func (m *Metrics) MCPRestart(server string) {
	if m != nil {
		m.MCPRestarts.WithLabelValues(server).Inc()
	}
}

// MCPToolCall counts one MCP tool call and observes its latency.
func (m *Metrics) MCPToolCall(server, outcome string, seconds float64) {
	if m != nil {
		m.MCPToolCalls.WithLabelValues(server, outcome).Inc()
		m.MCPToolSeconds.WithLabelValues(server).Observe(seconds)
	}
}

// CommandStarted counts a command an ACP agent started.
func (m *Metrics) CommandStarted() {
	if m != nil {
		m.CommandsStarted.Inc()
		m.CommandsRunning.Inc()
	}
}

// CommandEnded counts a command's end; killed names why the bot killed it
// ("" when it exited by itself).
func (m *Metrics) CommandEnded(killed string) {
	if m != nil {
		m.CommandsRunning.Dec()
		if killed != "" {
			m.CommandsKilled.WithLabelValues(killed).Inc()
		}
	}
}

// ModelCall counts one model call by its outcome.
func (m *Metrics) ModelCall(model, outcome string) {
	if m != nil {
		m.ModelCalls.WithLabelValues(model, outcome).Inc()
	}
}

// ModelFallback counts a call handed on from one model to the next.
func (m *Metrics) ModelFallback(from, to string) {
	if m != nil {
		m.ModelFallbacks.WithLabelValues(from, to).Inc()
	}
}

// breakerStates are the values of agentbot_model_breaker's state label.
var breakerStates = []string{"closed", "open", "half-open"}

// ModelBreaker sets a model's breaker state.
func (m *Metrics) ModelBreaker(model, state string) {
	if m == nil {
		return
	}
	for _, s := range breakerStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.ModelBreakers.WithLabelValues(model, s).Set(v)
	}
}

// TokensUsed counts a model call's tokens.
func (m *Metrics) TokensUsed(model, agent string, input, output, cached int64) {
	if m == nil {
		return
	}
	m.Tokens.WithLabelValues(model, agent, "input").Add(float64(input))
	m.Tokens.WithLabelValues(model, agent, "output").Add(float64(output))
	m.Tokens.WithLabelValues(model, agent, "cached").Add(float64(cached))
}
