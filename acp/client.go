package acp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// handler receives what the agent sends during a session.
type handler interface {
	update(ctx context.Context, n sdk.SessionNotification)
	permission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error)
}

// conn is one running agent process and its ACP connection.
type conn struct {
	proc *Process
	c    *sdk.ClientSideConnection
	// updates tells when the updates the agent sent are all handled.
	updates *updates
	caps    sdk.AgentCapabilities
	term    *terminals // nil: the terminal capability is off
	// proxy is the sandboxed agent's way to its model endpoints (nil: none).
	proxy *endpointProxy
}

// close stops the agent process and every command it ran (bounded).
func (c *conn) close() {
	if c.term != nil {
		c.term.closeAll()
	}
	c.proc.Stop()
	if c.proxy != nil {
		c.proxy.close()
	}
}

// dial starts the agent and runs initialize (bounded by ctx).
// With term set, the terminal capability is on and its commands run there.
func dial(ctx context.Context, pc ProcessConfig, ws *Workspace, h handler, term *terminals) (*conn, error) {
	p, err := StartProcess(pc)
	if err != nil {
		return nil, err
	}
	up := newUpdates(p.stdout)
	cl := &client{ws: ws, h: h, term: term, updates: up}
	c := sdk.NewClientSideConnection(cl, p.stdin, up)
	c.SetLogger(slog.New(slog.DiscardHandler)) // its lines would bypass the bot's logger
	init, err := c.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo:      &sdk.Implementation{Name: "agentbot", Version: "1"},
		ClientCapabilities: sdk.ClientCapabilities{
			Fs:       sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: term != nil,
		},
	})
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("initialize agent %s: %w", pc.Command, agentErr(err, p))
	}
	return &conn{proc: p, c: c, updates: up, caps: init.AgentCapabilities, term: term}, nil
}

// agentErr prefers "the process exited" over a broken-pipe error.
func agentErr(err error, p *Process) error {
	select {
	case <-p.Done():
		return fmt.Errorf("%s: %w", exitText(p.Err()), ErrAgentExited)
	case <-time.After(50 * time.Millisecond):
		return err
	}
}

// ErrAgentExited is an agent process that ended while it was needed.
var ErrAgentExited = errors.New("agent process exited")

// Probe starts an agent once and runs initialize (bot doctor).
func Probe(ctx context.Context, pc ProcessConfig, dir string) (sdk.AgentCapabilities, error) {
	ws, err := NewWorkspace(dir)
	if err != nil {
		return sdk.AgentCapabilities{}, err
	}
	pc.Dir = ws.Root()
	c, err := dial(ctx, pc, ws, nopHandler{}, nil)
	if err != nil {
		return sdk.AgentCapabilities{}, err
	}
	c.proc.Stop()
	return c.caps, nil
}

type nopHandler struct{}

func (nopHandler) update(context.Context, sdk.SessionNotification) {}
func (nopHandler) permission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// client is the bot's side of the protocol: file access inside the
// workspace, permission requests and session updates to the handler, and
// commands (terminal/*) when the agent's terminal is on.
type client struct {
	ws      *Workspace
	h       handler
	term    *terminals
	updates *updates
}

var _ sdk.Client = (*client)(nil)

func (c *client) ReadTextFile(ctx context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	text, err := c.ws.ReadText(p.Path, p.Line, p.Limit)
	if errors.Is(err, fs.ErrNotExist) {
		// A file not there yet reads as empty: agents read before they
		// write (to show a diff), and Gemini CLI 0.61 cannot tell a
		// JSON-RPC "Resource not found" error from a failure (it looks
		// for ENOENT on an Error, and gets a plain error object), so a
		// new file could never be written. See docs/DECISIONS.md.
		return sdk.ReadTextFileResponse{Content: ""}, nil
	}
	if err != nil {
		return sdk.ReadTextFileResponse{}, fsError(err)
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

func (c *client) WriteTextFile(ctx context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	if err := c.ws.WriteText(p.Path, p.Content); err != nil {
		return sdk.WriteTextFileResponse{}, fsError(err)
	}
	return sdk.WriteTextFileResponse{}, nil
}

// fsError is a file request's error as the protocol names it: a missing
// file is "Resource not found" (-32002), a refused path or a file over the
// read limit "Invalid params" (its data says which, in words).
func fsError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &sdk.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": err.Error()}}
	case errors.Is(err, ErrOutsideWorkspace), errors.Is(err, ErrTooLarge):
		return sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	return err
}

func (c *client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return c.h.permission(ctx, p)
}

func (c *client) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	defer c.updates.done()
	c.h.update(ctx, n)
	return nil
}

func (c *client) CreateTerminal(ctx context.Context, p sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	if c.term == nil {
		return sdk.CreateTerminalResponse{}, errNoTerminal
	}
	id, err := c.term.create(ctx, p)
	return sdk.CreateTerminalResponse{TerminalId: id}, err
}

func (c *client) KillTerminal(_ context.Context, p sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	if c.term == nil {
		return sdk.KillTerminalResponse{}, errNoTerminal
	}
	return sdk.KillTerminalResponse{}, c.term.killID(p.TerminalId)
}

func (c *client) TerminalOutput(_ context.Context, p sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	if c.term == nil {
		return sdk.TerminalOutputResponse{}, errNoTerminal
	}
	return c.term.output(p.TerminalId)
}

func (c *client) ReleaseTerminal(_ context.Context, p sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	if c.term == nil {
		return sdk.ReleaseTerminalResponse{}, errNoTerminal
	}
	return sdk.ReleaseTerminalResponse{}, c.term.release(p.TerminalId)
}

func (c *client) WaitForTerminalExit(ctx context.Context, p sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	if c.term == nil {
		return sdk.WaitForTerminalExitResponse{}, errNoTerminal
	}
	st, err := c.term.wait(ctx, p.TerminalId)
	return sdk.WaitForTerminalExitResponse{ExitCode: st.ExitCode, Signal: st.Signal}, err
}
