package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
)

// newACP builds the external-agent manager from acp.agents (nil when none
// is configured). Relative workspaces are resolved against the working
// directory, like store.path.
func newACP(a *App) (*acp.Manager, error) {
	if len(a.cfg.ACP.Agents) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(a.cfg.ACP.Agents))
	for n := range a.cfg.ACP.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	var agents []acp.AgentConfig
	for _, n := range names {
		c := a.cfg.ACP.Agents[n]
		ws, err := filepath.Abs(c.Workspace)
		if err != nil {
			ws = c.Workspace
		}
		cmds, err := acpCommandOptions(a.cfg, n, ws)
		if err != nil {
			return nil, err
		}
		if cmds.Sandbox == nil {
			a.log.Warn().Str("agent", n).Msg("⚠️ acp agent runs WITHOUT A SANDBOX (sandbox: none): it and every command it runs can read, change and send anything the bot's user can")
		}
		agents = append(agents, acp.AgentConfig{Name: n, Command: c.Command, Args: c.Args, Env: c.Env, Workspace: ws,
			Users: c.Users, Roles: c.Roles, IdleTimeout: c.IdleShutdown, MaxSessions: c.MaxSessions, Terminal: c.Terminal, Commands: cmds})
	}
	return acp.New(acp.Options{Agents: agents, PermissionTimeout: a.cfg.ACP.PermissionTimeout, Ready: a.recovered},
		acp.Deps{Live: a.outbound, Notices: outboundNotices{a.outbound}, Transcripts: a.transcripts, Bindings: a.bindings, Threads: a.platforms,
			Authority: a.auth, Clock: a.clock, Log: a.log.With().Str("component", "acp").Logger(), Procs: a.procs,
			Commands: acp.CommandMetrics{Started: a.metrics.CommandStarted, Ended: a.metrics.CommandEnded}}), nil
}

// acpCommandOptions is how agent name's commands run: its timeout and
// approval, and with sandbox: bwrap the sandbox, which hides the bot's
// own files from the agent (its HOME, the store's directory, the config
// file, the other sessions' workspaces) and shows the agent's program.
func acpCommandOptions(cfg *config.Config, name, workspace string) (acp.CommandOptions, error) {
	c := cfg.ACP.Agents[name]
	o := acp.CommandOptions{Timeout: c.CommandTimeout, Approve: c.Approve == config.ApproveAsk}
	if c.Sandbox != config.SandboxBwrap {
		return o, nil
	}
	sb, err := acp.FindSandbox(c.Network)
	if err == nil {
		err = sb.Check()
	}
	if err != nil {
		return o, fmt.Errorf("acp.agents.%s.sandbox: %w; fix that or set sandbox: none (no confinement)", name, err)
	}
	if home, err := os.UserHomeDir(); err == nil {
		sb.Hide = append(sb.Hide, home)
	}
	if cfg.Store.Driver == "" || cfg.Store.Driver == "bolt" {
		if p, err := filepath.Abs(cfg.Store.Path); err == nil {
			sb.Hide = append(sb.Hide, filepath.Dir(p))
		}
	}
	if f := cfg.File(); f != "" {
		if p, err := filepath.Abs(f); err == nil {
			sb.Hide = append(sb.Hide, p)
		}
	}
	sb.Hide = append(sb.Hide, workspace)
	sb.Hide = slices.DeleteFunc(sb.Hide, func(p string) bool { return p == "/" || p == "" })
	if dir := programDir(c.Command, acp.AgentEnv(c.Env, "")); dir != "" {
		sb.Expose = append(sb.Expose, dir)
	}
	// The agent reaches its model endpoints only, through the bot itself
	// run as the relay inside the sandbox.
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			sb.Relay = []string{real, RelayCommand}
			sb.Expose = append(sb.Expose, real)
		}
	}
	o.Sandbox = sb
	return o, nil
}

// RelayCommand is the bot's subcommand that runs acp.RelayMain (cmd/bot,
// and the test binary of this package, dispatch it).
const RelayCommand = "sandbox-relay"

// RelayMain runs the relay subcommand (inside an agent's sandbox).
func RelayMain(args []string) int { return acp.RelayMain(args) }

// programDir is what of the agent's program the sandbox must show: its
// directory, or for an npm program the node_modules it lives in.
func programDir(command string, env []string) string {
	p, err := acp.LookPath(command, env, "")
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	if i := strings.LastIndex(real, string(filepath.Separator)+"node_modules"+string(filepath.Separator)); i >= 0 {
		return real[:i+len("/node_modules")]
	}
	return filepath.Dir(real)
}

// acpExternal is the sessions' way to the ACP agents (nil without any):
// the session manager resolves a conversation once and hands the messages
// of a thread bound to an ACP session on, with the binding it resolved.
func acpExternal(m *acp.Manager) session.External {
	if m == nil {
		return nil
	}
	return acpInbound{m}
}

// acpInbound translates the sessions' message into the ACP manager's.
type acpInbound struct{ m *acp.Manager }

func (a acpInbound) HandleMessage(ctx context.Context, rec binding.Record, msg session.Message) error {
	return a.m.HandleMessage(ctx, rec, acp.Message{Conversation: msg.Conversation, MessageID: msg.MessageID,
		AuthorID: msg.AuthorID, AuthorName: msg.AuthorName, Text: msg.Text})
}

// acpCommands serves the core's commands (core/command.ACP) from the
// manager: core imports no tool protocol, so the request, the result and
// the session limit's error are translated here.
type acpCommands struct{ *acp.Manager }

var _ command.ACP = acpCommands{}

func (a acpCommands) Start(ctx context.Context, req command.ACPStart) (command.ACPStarted, error) {
	res, err := a.Manager.Start(ctx, acp.StartRequest{Agent: req.Agent, Task: req.Task, Where: req.Where, UserID: req.UserID})
	if errors.Is(err, acp.ErrTooMany) {
		return command.ACPStarted{}, fmt.Errorf("%w: %w", command.ErrTooManyACP, err)
	}
	if err != nil {
		return command.ACPStarted{}, err
	}
	return command.ACPStarted{Thread: res.Thread, SessionKey: res.SessionKey, Created: res.Created}, nil
}

// DoctorACP starts each configured ACP agent once, in a scratch directory
// with a scratch HOME, and runs initialize; it prints a line per agent and
// returns the number that failed. The error names how the agent ended,
// never its environment.
func DoctorACP(ctx context.Context, cfg *config.Config, stdout io.Writer) int {
	problems := 0
	names := make([]string, 0, len(cfg.ACP.Agents))
	for n := range cfg.ACP.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := cfg.ACP.Agents[n]
		dir, err := os.MkdirTemp("", "agentbot-doctor-")
		if err != nil {
			fmt.Fprintf(stdout, "✘ acp agent %s: no scratch directory: %v\n", n, err)
			problems++
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		caps, err := acp.Probe(pctx, acp.ProcessConfig{Command: c.Command, Args: c.Args, Env: acp.AgentEnv(c.Env, filepath.Join(dir, "home"))}, filepath.Join(dir, "work"))
		cancel()
		_ = os.RemoveAll(dir)
		if err != nil {
			fmt.Fprintf(stdout, "✘ acp agent %s: %v\n", n, err)
			problems++
			continue
		}
		resume := "no session/load: a restart loses its context"
		if caps.LoadSession {
			resume = "resumes sessions with session/load"
		}
		fmt.Fprintf(stdout, "✔ acp agent %s: started and answered initialize (%s)\n", n, resume)
		switch {
		case c.Sandbox == config.SandboxNone:
			fmt.Fprintf(stdout, "⚠ acp agent %s: sandbox: none: it and its commands run unconfined\n", n)
		default:
			sb, err := acp.FindSandbox(c.Network)
			if err == nil {
				err = sb.Check()
			}
			if err != nil {
				fmt.Fprintf(stdout, "✘ acp agent %s: %v (or set sandbox: none)\n", n, err)
				problems++
			}
		}
	}
	return problems
}

// outboundNotices is the ACP manager's acp.Notifier: an intro or a notice
// goes through the one send owner, which writes it into the conversation's
// transcript. (A turn's live messages use Outbound.Live directly.)
type outboundNotices struct{ o *delivery.Outbound }

var _ acp.Notifier = outboundNotices{}

func (n outboundNotices) Notify(ctx context.Context, conv binding.ConversationRef, deliveryID, text string, source transcript.Source, agentID string) error {
	_, err := n.o.Deliver(ctx, delivery.Delivery{ID: deliveryID, Target: conv, Text: text,
		Producer: delivery.Producer{Source: source, AgentID: agentID}}, nil)
	return err
}
