package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/tools/mcp"
)

// newToolHub maps mcp.servers and agents[].mcp onto a hub (nil when no
// server is configured). auth decides who may use a server; obs records
// metrics (either may be nil).
func newToolHub(cfg *config.Config, auth mcp.Authorizer, obs mcp.Observer, log zerolog.Logger, backoff time.Duration, tr mcp.Tracker) *mcp.Hub {
	if len(cfg.MCP.Servers) == 0 {
		return nil
	}
	o := mcp.Options{Agents: map[string][]string{}, Backoff: backoff}
	for name, s := range cfg.MCP.Servers {
		o.Servers = append(o.Servers, mcp.Server{Name: name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers,
			Timeout: s.Timeout, AllowedTools: s.AllowedTools, MaxResultBytes: s.MaxResultBytes,
			Grant: authz.Grant{Users: s.Users, Roles: s.Roles, Operators: s.OperatorsOnly}})
	}
	for _, a := range cfg.Agents {
		o.Agents[a.ID] = a.MCP
	}
	d := mcp.Deps{Observe: obs, Redact: redact.New(cfg.Secrets()...), Log: log.With().Str("component", "mcp").Logger(), Procs: tr}
	if auth != nil {
		d.Auth = auth
	}
	return mcp.New(o, d)
}

// startHub runs a hub until every server had its first start (or timeout);
// stop ends it and waits for its processes.
func startHub(ctx context.Context, h *mcp.Hub, timeout time.Duration) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = h.Run(rctx); close(done) }()
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	_ = h.WaitStarted(wctx)
	return func() { cancel(); <-done }
}

// DoctorMCP starts each configured server once and lists its tools; a
// server that does not start is a problem.
func DoctorMCP(ctx context.Context, cfg *config.Config, stdout io.Writer) int {
	h := newToolHub(cfg, nil, nil, zerolog.Nop(), time.Hour, nil)
	if h == nil {
		return 0
	}
	stop := startHub(ctx, h, startWait(cfg))
	defer stop()
	problems := 0
	for _, st := range h.Status() {
		if st.State != mcp.StateUp {
			problems++
			fmt.Fprintf(stdout, "✘ mcp server %s did not start: %s\n", st.Name, orUnknown(st.LastError))
		} else {
			fmt.Fprintf(stdout, "✔ mcp server %s: %d tools: %s\n", st.Name, len(st.Tools), strings.Join(st.Tools, ", "))
		}
		if !slices.ContainsFunc(cfg.Agents, func(a config.AgentConfig) bool { return slices.Contains(a.MCP, st.Name) }) {
			fmt.Fprintf(stdout, "  ⚠ no agent uses it (add it to agents[].mcp)\n")
		}
	}
	return problems
}

func orUnknown(s string) string {
	if s == "" {
		return "no answer within its timeout"
	}
	return s
}

// startWait is how long doctor and inspect wait for servers to start: the
// longest configured timeout, plus a little.
func startWait(cfg *config.Config) time.Duration {
	d := 5 * time.Second
	for _, s := range cfg.MCP.Servers {
		d = max(d, s.Timeout+2*time.Second)
	}
	return d
}

// InspectTools starts the configured servers once and prints the tools an
// agent's model is offered from them (AGENT defaults to the first agent),
// whoever may use them; the bot's own tools are listed too.
func InspectTools(ctx context.Context, cfg *config.Config, args []string, w io.Writer, asJSON bool) error {
	agent := cfg.DefaultAgent()
	if len(args) > 0 {
		a, ok := cfg.Agent(args[0])
		if !ok {
			return fmt.Errorf("unknown agent %q", args[0])
		}
		agent = a
	}
	type row struct {
		Name        string         `json:"name"`
		Source      string         `json:"source"` // bot | mcp:<server>
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters,omitempty"`
		Who         string         `json:"who"`
		Status      string         `json:"status,omitempty"`
	}
	var rows []row
	for _, n := range []string{"send_message", "spawn_subagent", "schedule_job", "list_jobs", "cancel_job"} {
		if !cfg.Scheduler.Enabled && strings.Contains(n, "job") {
			continue
		}
		rows = append(rows, row{Name: n, Source: "bot", Who: "main sessions (not subagents)"})
	}
	if h := newToolHub(cfg, nil, nil, zerolog.Nop(), time.Hour, nil); h != nil && len(agent.MCP) > 0 {
		stop := startHub(ctx, h, startWait(cfg))
		defer stop()
		status := map[string]mcp.Status{}
		for _, st := range h.Status() {
			status[st.Name] = st
		}
		for _, name := range agent.MCP {
			s := cfg.MCP.Servers[name]
			who := "everyone allowed to talk"
			if g := (authz.Grant{Users: s.Users, Roles: s.Roles, Operators: s.OperatorsOnly}); !g.Open() {
				var parts []string
				if len(s.Users) > 0 {
					parts = append(parts, "users "+strings.Join(s.Users, ","))
				}
				if len(s.Roles) > 0 {
					parts = append(parts, "roles "+strings.Join(s.Roles, ","))
				}
				if s.OperatorsOnly {
					parts = append(parts, "operators")
				}
				who = strings.Join(parts, "; ")
			}
			if st := status[name]; st.State != mcp.StateUp {
				rows = append(rows, row{Name: name + mcp.Separator + "*", Source: "mcp:" + name, Who: who, Status: "not started: " + orUnknown(st.LastError)})
				continue
			}
			for _, t := range h.ToolSpecs(name) {
				rows = append(rows, row{Name: t.Name, Source: "mcp:" + name, Description: t.Description, Parameters: t.Parameters, Who: who})
			}
		}
	}
	for _, r := range rows {
		if asJSON {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, string(b))
			continue
		}
		line := fmt.Sprintf("%-40s %-14s %s", r.Name, r.Source, firstLine(r.Description))
		if r.Status != "" {
			line += " (" + r.Status + ")"
		}
		fmt.Fprintf(w, "%s  [%s]\n", strings.TrimRight(line, " "), r.Who)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
