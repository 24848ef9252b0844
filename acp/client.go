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
	caps sdk.AgentCapabilities
}

// dial starts the agent and runs initialize (bounded by ctx).
func dial(ctx context.Context, pc ProcessConfig, ws *Workspace, h handler) (*conn, error) {
	p, err := StartProcess(pc)
	if err != nil {
		return nil, err
	}
	cl := &client{ws: ws, h: h}
	c := sdk.NewClientSideConnection(cl, p.stdin, p.stdout)
	c.SetLogger(slog.New(slog.DiscardHandler)) // its lines would bypass the bot's logger
	init, err := c.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo:      &sdk.Implementation{Name: "agentbot", Version: "1"},
		ClientCapabilities: sdk.ClientCapabilities{
			Fs:       sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: false,
		},
	})
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("initialize agent %s: %w", pc.Command, agentErr(err, p))
	}
	return &conn{proc: p, c: c, caps: init.AgentCapabilities}, nil
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
	c, err := dial(ctx, pc, ws, nopHandler{})
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
// no terminal.
type client struct {
	ws *Workspace
	h  handler
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
	c.h.update(ctx, n)
	return nil
}

var errNoTerminal = errors.New("the terminal capability is off")

func (c *client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNoTerminal
}
func (c *client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNoTerminal
}
func (c *client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNoTerminal
}
func (c *client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNoTerminal
}
func (c *client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNoTerminal
}
