package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// CommandOptions say how an agent's terminal/* commands run.
type CommandOptions struct {
	// Timeout kills a command that runs longer (0 = none).
	Timeout time.Duration
	// Sandbox confines each command (nil: run directly, sandbox: none).
	Sandbox *Sandbox
	// Approve: each command is shown with Allow/Deny buttons before it starts.
	Approve bool
}

// DefaultOutputCap bounds a command's kept output when the agent sets no
// outputByteLimit (what one command can cost in memory).
const DefaultOutputCap = 1 << 20

// ErrCommandRefused is a command the approver denied (or nobody allowed in time).
var ErrCommandRefused = errors.New("the command was not allowed")

// commandHooks is what a session does around its commands: ask before one
// starts, show it while it runs.
type commandHooks interface {
	// approveCommand asks for a command; nil allows it.
	approveCommand(ctx context.Context, line, cwd string) error
	// commandChanged shows a command's state (started, output, ended).
	commandChanged(c *command)
}

// terminals runs one agent connection's terminal/* commands: each under a
// PTY in its own session and process group, recorded while it runs,
// killed on kill, release, timeout and when the connection closes.
type terminals struct {
	ws      *Workspace
	env     []string
	opt     CommandOptions
	grace   time.Duration
	after   func(time.Duration) <-chan time.Time
	now     func() time.Time
	track   func(pid int) func()
	hooks   commandHooks
	metrics CommandMetrics

	mu     sync.Mutex
	byID   map[string]*command
	closed bool
}

// CommandMetrics counts commands (nil fields count nothing).
type CommandMetrics struct {
	Started func()
	// Ended: killed is why the bot killed it ("killed", "timeout"), "" when
	// it exited by itself.
	Ended func(killed string)
}

// command is one running (or finished, not yet released) terminal.
type command struct {
	ID, Line, Cwd string
	Started       time.Time

	cmd  *exec.Cmd
	pty  *os.File
	out  *capBuffer
	done chan struct{} // closed once it exited and its output is read

	mu    sync.Mutex
	exit  sdk.TerminalExitStatus
	ended time.Time
	why   string // "timeout" | "killed" | ""
}

// create starts a command (terminal/create).
func (ts *terminals) create(ctx context.Context, req sdk.CreateTerminalRequest) (string, error) {
	ts.mu.Lock()
	closed := ts.closed
	ts.mu.Unlock()
	if closed {
		return "", errors.New("create terminal: the session is closing")
	}
	cwd := ts.ws.Root()
	if req.Cwd != nil && *req.Cwd != "" {
		p, err := ts.ws.Resolve(*req.Cwd)
		if err != nil {
			return "", sdk.NewInvalidParams(map[string]any{"error": "cwd: " + err.Error()})
		}
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return "", sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("cwd %q is not a directory of the workspace", *req.Cwd)})
		}
		cwd = p
	}
	if strings.TrimSpace(req.Command) == "" {
		return "", sdk.NewInvalidParams(map[string]any{"error": "command is empty"})
	}
	env := append([]string{}, ts.env...)
	for _, e := range req.Env {
		if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") || strings.ContainsRune(e.Value, 0) {
			return "", sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("env %q is not a variable name", e.Name)})
		}
		env = append(env, e.Name+"="+e.Value) // later wins (os/exec)
	}
	args := req.Args
	line := commandLine(req.Command, args)
	if len(args) == 0 && strings.ContainsAny(req.Command, shellChars) {
		// A shell line (Claude Code sends its Bash tool's command so): run
		// by the shell, shown as written.
		sh := "sh"
		if _, err := LookPath("bash", env, ts.ws.Root()); err == nil {
			sh = "bash"
		}
		req.Command, args, line = sh, []string{"-c", req.Command}, req.Command
	}
	if ts.opt.Approve {
		if err := ts.hooks.approveCommand(ctx, line, cwd); err != nil {
			return "", &sdk.RequestError{Code: -32000, Message: "command not run: " + err.Error()}
		}
	}
	argv := append([]string{req.Command}, args...)
	if ts.opt.Sandbox != nil {
		argv = ts.opt.Sandbox.Wrap(argv, SandboxPaths{Workspace: ts.ws.Root(), Cwd: cwd}, ts.opt.Timeout)
	} else if p, err := LookPath(req.Command, env, cwd); err == nil {
		argv[0] = p
	}
	c := &command{ID: newID(), Line: line, Cwd: cwd, Started: ts.now(), out: newCapBuffer(req.OutputByteLimit), done: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = env
	c.cmd.Dir = cwd
	// A session (and so a process group) of its own with the PTY as its
	// controlling terminal; the kernel SIGKILLs it if the bot dies.
	f, err := pty.StartWithAttrs(c.cmd, &pty.Winsize{Rows: 40, Cols: 120}, &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL})
	if err != nil {
		return "", &sdk.RequestError{Code: -32000, Message: "command could not be started: " + err.Error()}
	}
	c.pty = f
	release := func() {}
	if ts.track != nil {
		release = ts.track(c.cmd.Process.Pid)
	}
	ts.mu.Lock()
	if ts.byID == nil {
		ts.byID = map[string]*command{}
	}
	ts.byID[c.ID] = c
	closed = ts.closed
	ts.mu.Unlock()
	if ts.metrics.Started != nil {
		ts.metrics.Started()
	}
	go ts.supervise(c, release)
	if closed { // closeAll ran while it started
		ts.kill(c, "killed")
	}
	ts.hooks.commandChanged(c)
	return c.ID, nil
}

// supervise reads the command's output, waits for it, kills what is left
// of its group, and ends it (timeout included).
func (ts *terminals) supervise(c *command, release func()) {
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := c.pty.Read(buf)
			if n > 0 {
				c.out.Write(buf[:n])
				ts.hooks.commandChanged(c)
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = c.cmd.Wait()
	}()
	var timeout <-chan time.Time
	if ts.opt.Timeout > 0 {
		timeout = ts.after(ts.opt.Timeout)
	}
	select {
	case <-exited:
	case <-timeout:
		ts.kill(c, "timeout")
		<-exited
	}
	// Whatever the command left in its group dies with it (invariant 21).
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	release()
	// The rest of its output; a process that left the group may hold the
	// PTY open: it is not waited for beyond a second.
	select {
	case <-read:
	case <-ts.after(time.Second):
	}
	_ = c.pty.Close()
	<-read
	c.mu.Lock()
	c.exit = exitStatus(c.cmd.ProcessState)
	c.ended = ts.now()
	why := c.why
	c.mu.Unlock()
	if ts.metrics.Ended != nil {
		ts.metrics.Ended(why)
	}
	close(c.done)
	ts.hooks.commandChanged(c)
}

// kill ends the command's process group: SIGTERM, then SIGKILL after the
// grace. It does not wait.
func (ts *terminals) kill(c *command, why string) {
	select {
	case <-c.done:
		return
	default:
	}
	c.mu.Lock()
	first := c.why == ""
	if first {
		c.why = why
	}
	c.mu.Unlock()
	if !first {
		return
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-c.done:
		case <-ts.after(ts.grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
}

func (ts *terminals) get(id string) (*command, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	c := ts.byID[id]
	if c == nil {
		return nil, &sdk.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": "no terminal " + id}}
	}
	return c, nil
}

// output is terminal/output.
func (ts *terminals) output(id string) (sdk.TerminalOutputResponse, error) {
	c, err := ts.get(id)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	out, trunc := c.out.String()
	resp := sdk.TerminalOutputResponse{Output: out, Truncated: trunc}
	select {
	case <-c.done:
		st := c.status()
		resp.ExitStatus = &st
	default:
	}
	return resp, nil
}

// wait is terminal/wait_for_exit.
func (ts *terminals) wait(ctx context.Context, id string) (sdk.TerminalExitStatus, error) {
	c, err := ts.get(id)
	if err != nil {
		return sdk.TerminalExitStatus{}, err
	}
	select {
	case <-c.done:
		return c.status(), nil
	case <-ctx.Done():
		return sdk.TerminalExitStatus{}, ctx.Err()
	}
}

// killID is terminal/kill: the command ends; the terminal stays readable.
func (ts *terminals) killID(id string) error {
	c, err := ts.get(id)
	if err != nil {
		return err
	}
	ts.kill(c, "killed")
	return nil
}

// release is terminal/release: killed if still running, then forgotten.
func (ts *terminals) release(id string) error {
	c, err := ts.get(id)
	if err != nil {
		return err
	}
	ts.kill(c, "killed")
	ts.mu.Lock()
	delete(ts.byID, id)
	ts.mu.Unlock()
	return nil
}

// running lists the commands still running, oldest first.
func (ts *terminals) running() []*command {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*command
	for _, c := range ts.byID {
		select {
		case <-c.done:
		default:
			out = append(out, c)
		}
	}
	sortCommands(out)
	return out
}

// closeAll kills every command and waits for them (the connection is
// closing: session end, /stop of the agent, bot shutdown). Bounded by the
// grace and the output drain.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	cs := make([]*command, 0, len(ts.byID))
	for _, c := range ts.byID {
		cs = append(cs, c)
	}
	ts.mu.Unlock()
	for _, c := range cs {
		ts.kill(c, "killed")
	}
	for _, c := range cs {
		<-c.done
	}
}

// status is the exit status (valid once done).
func (c *command) status() sdk.TerminalExitStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exit
}

// state is what the thread shows of the command.
func (c *command) state() (ended bool, exit sdk.TerminalExitStatus, why string, took time.Duration) {
	select {
	case <-c.done:
		ended = true
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return ended, c.exit, c.why, c.ended.Sub(c.Started)
}

func exitStatus(ps *os.ProcessState) sdk.TerminalExitStatus {
	if ps == nil {
		return sdk.TerminalExitStatus{}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		s := unix.SignalName(ws.Signal())
		if s == "" {
			s = ws.Signal().String()
		}
		return sdk.TerminalExitStatus{Signal: &s}
	}
	code := ps.ExitCode()
	return sdk.TerminalExitStatus{ExitCode: &code}
}

// shellChars in a command without arguments make it a shell line.
const shellChars = " \t\n;&|<>()$`\\\"'*?[]#~"

// commandLine is how a command is shown: its words, quoted where needed.
func commandLine(command string, args []string) string {
	words := append([]string{command}, args...)
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`|&;<>()*?[]{}~#") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// LookPath finds a program in the PATH of env (not the bot's own); a
// name with a slash is taken relative to dir.
func LookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// capBuffer keeps the last limit bytes of a command's output, cut at a
// character boundary (the protocol's outputByteLimit); safe for
// concurrent use.
type capBuffer struct {
	mu        sync.Mutex
	b         []byte
	limit     int
	truncated bool
}

func newCapBuffer(limit *int) *capBuffer {
	n := DefaultOutputCap
	if limit != nil && *limit >= 0 && *limit < n {
		n = *limit
	}
	return &capBuffer{limit: n}
}

func (b *capBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if over := len(b.b) - b.limit; over > 0 {
		cut := over
		// Never start inside a character: drop its continuation bytes too.
		for cut < len(b.b) && !utf8.RuneStart(b.b[cut]) {
			cut++
		}
		b.b = append(b.b[:0], b.b[cut:]...)
		b.truncated = true
	}
}

// Tail is the last n bytes of the kept output, from a character start.
func (b *capBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.b
	if len(t) > n {
		t = t[len(t)-n:]
		for len(t) > 0 && !utf8.RuneStart(t[0]) {
			t = t[1:]
		}
	}
	return string(t)
}

// String is the kept output without a character still incomplete at its
// end (its rest has not arrived yet).
func (b *capBuffer) String() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	end := len(b.b)
	for i := end - 1; i >= 0 && i >= end-utf8.UTFMax; i-- {
		if utf8.RuneStart(b.b[i]) {
			if !utf8.FullRune(b.b[i:end]) {
				end = i
			}
			break
		}
	}
	return string(b.b[:end]), b.truncated
}

func sortCommands(cs []*command) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Started.Before(cs[j].Started) })
}
