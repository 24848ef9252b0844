// Command scriptagent is a scripted ACP agent for tests. Each prompt is a
// script, one command a line:
//
//	say TEXT                 an agent_message_chunk
//	chunks N TEXT            TEXT as N chunks
//	tool ID TITLE            a tool_call (pending)
//	update ID STATUS         a tool_call_update (in_progress|completed|failed)
//	plan A|B|C               a plan (the first entry in progress)
//	ask ID TITLE             a session/request_permission (allow/reject), then says "permission: <option|cancelled>";
//	                         the script goes on only when allowed
//	write PATH TEXT          fs/write_text_file, then says "wrote PATH" or "write refused: ERR"
//	read PATH                fs/read_text_file, then says "read: TEXT" or "read refused: ERR"
//	run [limit=N] [cwd=DIR] SCRIPT
//	                         terminal/create of sh -c SCRIPT, wait_for_exit, output, release; then says
//	                         "ran exit=<code> signal=<sig> truncated=<bool> output=<output>" or "run refused: ERR"
//	connect HOST:PORT        opens a TCP connection (through $HTTPS_PROXY with CONNECT when set); says
//	                         "connect ok" or "connect failed: ERR"
//	dial HOST:PORT           opens a TCP connection directly; says "dial ok" or "dial failed: ERR"
//	runline LINE             as run, but LINE is the command itself, without arguments (as Claude Code sends one)
//	env NAME                 says "env NAME=<value>" or "env NAME unset"
//	wait                     blocks until session/cancel, then ends the turn "cancelled"
//	hang                     blocks for good, ignoring session/cancel
//	crash                    exits with status 3 mid-turn
//
// Flags: -load advertises loadSession (and replays "say" history on load);
// -ignore-eof keeps running after stdin closes (until SIGTERM);
// -ignore-term also ignores SIGTERM (until SIGKILL). Every session id and
// prompt is appended to $SCRIPTAGENT_LOG when set.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

type agent struct {
	conn *sdk.AgentSideConnection
	load bool

	mu      sync.Mutex
	history map[string][]string
	n       int
}

func (a *agent) logf(format string, args ...any) {
	if p := os.Getenv("SCRIPTAGENT_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, format+"\n", args...)
			f.Close()
		}
	}
}

func (a *agent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func (a *agent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.logf("initialize fs.read=%v fs.write=%v terminal=%v", p.ClientCapabilities.Fs.ReadTextFile, p.ClientCapabilities.Fs.WriteTextFile, p.ClientCapabilities.Terminal)
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber, AgentCapabilities: sdk.AgentCapabilities{LoadSession: a.load}}, nil
}

func (a *agent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *agent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *agent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *agent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, nil
}
func (a *agent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *agent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}

func (a *agent) NewSession(_ context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	a.mu.Lock()
	a.n++
	id := fmt.Sprintf("s%d-%d", os.Getpid(), a.n)
	a.mu.Unlock()
	a.logf("new %s cwd=%s", id, p.Cwd)
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(id)}, nil
}

func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	a.logf("load %s", p.SessionId)
	// Replays the conversation, as the protocol asks.
	_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText("(replayed history)")})
	return sdk.LoadSessionResponse{}, nil
}

func (a *agent) say(ctx context.Context, sid sdk.SessionId, text string) {
	_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: sdk.UpdateAgentMessageText(text)})
}

func (a *agent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	var script strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			script.WriteString(b.Text.Text)
		}
	}
	a.logf("prompt %s %q", p.SessionId, script.String())
	sid := p.SessionId
	for _, line := range strings.Split(script.String(), "\n") {
		cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		arg1, arg2, _ := strings.Cut(rest, " ")
		switch cmd {
		case "say":
			a.say(ctx, sid, rest)
		case "chunks":
			n, _ := strconv.Atoi(arg1)
			r := []rune(arg2)
			for i := 0; i < n; i++ {
				lo, hi := i*len(r)/n, (i+1)*len(r)/n
				a.say(ctx, sid, string(r[lo:hi]))
			}
		case "tool":
			_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: sdk.StartToolCall(sdk.ToolCallId(arg1), arg2, sdk.WithStartStatus(sdk.ToolCallStatusPending))})
		case "update":
			_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: sdk.UpdateToolCall(sdk.ToolCallId(arg1), sdk.WithUpdateStatus(sdk.ToolCallStatus(arg2)))})
		case "plan":
			var es []sdk.PlanEntry
			for i, c := range strings.Split(rest, "|") {
				st := sdk.PlanEntryStatusPending
				if i == 0 {
					st = sdk.PlanEntryStatusInProgress
				}
				es = append(es, sdk.PlanEntry{Content: c, Status: st, Priority: sdk.PlanEntryPriorityMedium})
			}
			_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: sdk.UpdatePlan(es...)})
		case "ask":
			title := arg2
			resp, err := a.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{SessionId: sid,
				ToolCall: sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(arg1), Title: &title},
				Options: []sdk.PermissionOption{
					{OptionId: "allow", Name: "Allow", Kind: sdk.PermissionOptionKindAllowOnce},
					{OptionId: "reject", Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce},
				}})
			// Like a real agent, it goes on only when allowed.
			switch {
			case err != nil && ctx.Err() != nil:
				return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
			case err != nil:
				a.say(ctx, sid, "permission error")
				return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
			case resp.Outcome.Selected != nil:
				a.say(ctx, sid, "permission: "+string(resp.Outcome.Selected.OptionId))
				if resp.Outcome.Selected.OptionId != "allow" {
					return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
				}
			default:
				a.say(ctx, sid, "permission: cancelled")
				return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
			}
		case "write":
			if _, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sid, Path: arg1, Content: arg2}); err != nil {
				a.say(ctx, sid, "write refused: "+err.Error())
			} else {
				a.say(ctx, sid, "wrote "+arg1)
			}
		case "read":
			r, err := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sid, Path: arg1})
			if err != nil {
				a.say(ctx, sid, "read refused: "+err.Error())
			} else {
				a.say(ctx, sid, "read: "+r.Content)
			}
		case "run":
			a.run(ctx, sid, rest)
		case "runline":
			a.run(ctx, sid, "line="+rest)
		case "connect":
			if err := connect(arg1); err != nil {
				a.say(ctx, sid, "connect failed: "+err.Error())
			} else {
				a.say(ctx, sid, "connect ok")
			}
		case "dial":
			if c, err := net.DialTimeout("tcp", arg1, 5*time.Second); err != nil {
				a.say(ctx, sid, "dial failed: "+err.Error())
			} else {
				c.Close()
				a.say(ctx, sid, "dial ok")
			}
		case "env":
			if v, ok := os.LookupEnv(arg1); ok {
				a.say(ctx, sid, "env "+arg1+"="+v)
			} else {
				a.say(ctx, sid, "env "+arg1+" unset")
			}
		case "wait":
			<-ctx.Done()
			a.logf("cancelled %s", sid)
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		case "hang":
			for {
				time.Sleep(time.Hour)
			}
		case "crash":
			os.Exit(3)
		}
		if ctx.Err() != nil {
			a.logf("cancelled %s", sid)
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		}
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

func (a *agent) run(ctx context.Context, sid sdk.SessionId, rest string) {
	req := sdk.CreateTerminalRequest{SessionId: sid, Command: "sh"}
	for {
		w, r, _ := strings.Cut(rest, " ")
		if v, ok := strings.CutPrefix(w, "limit="); ok {
			n, _ := strconv.Atoi(v)
			req.OutputByteLimit = &n
		} else if v, ok := strings.CutPrefix(w, "cwd="); ok {
			req.Cwd = &v
		} else if v, ok := strings.CutPrefix(rest, "line="); ok {
			req.Command, rest = v, ""
			break
		} else {
			break
		}
		rest = r
	}
	if rest != "" {
		req.Args = []string{"-c", rest}
	}
	t, err := a.conn.CreateTerminal(ctx, req)
	if err != nil {
		a.say(ctx, sid, "run refused: "+err.Error())
		return
	}
	id := t.TerminalId
	ex, err := a.conn.WaitForTerminalExit(ctx, sdk.WaitForTerminalExitRequest{SessionId: sid, TerminalId: id})
	if err != nil {
		a.say(ctx, sid, "run wait failed: "+err.Error())
		return
	}
	out, err := a.conn.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: sid, TerminalId: id})
	if err != nil {
		a.say(ctx, sid, "run output failed: "+err.Error())
		return
	}
	_, _ = a.conn.ReleaseTerminal(ctx, sdk.ReleaseTerminalRequest{SessionId: sid, TerminalId: id})
	code, sig := "", ""
	if ex.ExitCode != nil {
		code = strconv.Itoa(*ex.ExitCode)
	}
	if ex.Signal != nil {
		sig = *ex.Signal
	}
	a.say(ctx, sid, fmt.Sprintf("ran exit=%s signal=%s truncated=%v output=%s", code, sig, out.Truncated, out.Output))
}

// connect reaches addr directly, or through the HTTPS_PROXY with CONNECT.
func connect(addr string) error {
	proxy := os.Getenv("HTTPS_PROXY")
	if proxy == "" {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	u, err := url.Parse(proxy)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("proxy: %s", resp.Status)
	}
	return nil
}

func main() {
	load := flag.Bool("load", false, "advertise loadSession")
	ignoreEOF := flag.Bool("ignore-eof", false, "keep running after stdin closes")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	flag.Parse()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	a := &agent{load: *load, history: map[string][]string{}}
	a.conn = sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	<-a.conn.Done()
	a.logf("stdin closed")
	if *ignoreEOF {
		for { // a bare select{} would be a deadlock the runtime ends
			time.Sleep(time.Hour)
		}
	}
}
