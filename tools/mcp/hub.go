package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/model"
)

// Server is one configured MCP server: a stdio program (Command, Args,
// Env) or a streamable HTTP endpoint (URL, Headers).
type Server struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string // added to the bot's own environment
	Dir     string            // working directory of a stdio server ("" = the bot's)
	URL     string
	Headers map[string]string
	// Timeout bounds each tool call and the start (handshake and tool list).
	Timeout time.Duration
	// AllowedTools are the tools offered (names as the server lists them);
	// empty = all.
	AllowedTools []string
	// Grant is who may use the server's tools.
	Grant authz.Grant
	// MaxResultBytes caps a result's text (default 32 KiB).
	MaxResultBytes int
	// Transport, if set, makes the client transport instead of Command or
	// URL (tests: the SDK's in-memory transport).
	Transport func() (sdk.Transport, error)
}

// Options are the hub's settings.
type Options struct {
	Servers []Server
	// Agents maps an agent id to the servers it may use (agents[].mcp).
	Agents map[string][]string
	// Backoff is the first restart delay (default 1s), doubled up to
	// MaxBackoff (default 1m) while the server keeps failing.
	Backoff, MaxBackoff time.Duration
	// FailingAfter is how many consecutive failed starts or crashes mark a
	// server failing (default 3).
	FailingAfter int
	// StableAfter is how long a session must stay up for its server's
	// failure count and backoff to reset (default 1m).
	StableAfter time.Duration
	// StopTimeout bounds closing one session at shutdown (default 3s).
	StopTimeout time.Duration
	// HTTPClient is for streamable HTTP servers (nil: a default client).
	HTTPClient *http.Client
}

// Authorizer decides who may use a server (core/authz.Authority).
type Authorizer interface {
	Permits(ctx context.Context, actor authz.Actor, g authz.Grant, what string) error
}

// Observer records the hub's metrics (nil: none). Server names are from the
// config, a bounded set.
type Observer interface {
	MCPServerUp(server string, up bool)
	MCPRestart(server string)
	MCPToolCall(server, outcome string, seconds float64)
}

// Deps are the hub's collaborators.
type Deps struct {
	Auth    Authorizer // nil: every server is open to everyone
	Observe Observer
	// Redact hides configured secrets (env and header values) in error
	// texts the hub returns and logs; the log itself should pass through
	// the same redactor.
	Redact *redact.Redactor
	Log    zerolog.Logger
	// After paces restarts (nil: time.After); Now measures stability (nil: time.Now).
	After func(time.Duration) <-chan time.Time
	Now   func() time.Time
	// Procs records each stdio server's process group (nil: none recorded).
	Procs Tracker
}

// Tracker records started process groups (internal/procs.Registry).
type Tracker interface {
	Started(ctx context.Context, pid int, kind, name string) (release func())
}

// Server states.
const (
	StateStarting = "starting"
	StateUp       = "up"
	StateDown     = "down"    // restarting after a crash or failed start
	StateFailing  = "failing" // down FailingAfter times in a row
	StateStopped  = "stopped"
)

// Status is a server's state for /readyz, doctor and inspect.
type Status struct {
	Name      string
	State     string
	Failures  int    // consecutive failed starts or crashes
	LastError string // redacted
	Restarts  int
	Tools     []string // model-facing names offered while up
	PID       int      // a stdio server's process id while up (0 otherwise)
	InFlight  int      // tool calls running now
}

// Hub owns the MCP client sessions. Safe for concurrent use.
type Hub struct {
	o       Options
	d       Deps
	servers map[string]*server
	order   []string
	agents  map[string][]string
}

type tool struct {
	name   string // model-facing
	remote string // as the server lists it
	spec   model.Tool
}

type server struct {
	cfg Server
	h   *Hub

	mu       sync.RWMutex
	sess     *sdk.ClientSession
	tools    []tool
	state    string
	fails    int
	lastErr  string
	restarts int
	pid      int
	inFlight int

	toldDown  int // restarts+1 when a turn was last told the server is not up
	refresh   chan struct{}
	attempted chan struct{} // closed after the first start attempt
	attemptMu sync.Once
}

// New returns a hub; it starts nothing until Run.
func New(o Options, d Deps) *Hub {
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(time.Minute, o.Backoff)
	}
	if o.FailingAfter <= 0 {
		o.FailingAfter = 3
	}
	if o.StableAfter <= 0 {
		o.StableAfter = time.Minute
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 3 * time.Second
	}
	if d.After == nil {
		d.After = time.After
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Redact == nil {
		d.Redact = redact.New()
	}
	h := &Hub{o: o, d: d, servers: map[string]*server{}, agents: o.Agents}
	for _, s := range o.Servers {
		if s.Timeout <= 0 {
			s.Timeout = 30 * time.Second
		}
		if s.MaxResultBytes <= 0 {
			s.MaxResultBytes = 32 << 10
		}
		h.servers[s.Name] = &server{cfg: s, h: h, state: StateStarting, refresh: make(chan struct{}, 1), attempted: make(chan struct{})}
		h.order = append(h.order, s.Name)
	}
	sort.Strings(h.order)
	return h
}

// Run starts every server and keeps it running until ctx ends; then every
// session is closed within StopTimeout (a stdio server's process group is
// killed if it does not exit).
func (h *Hub) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, name := range h.order {
		s := h.servers[name]
		wg.Go(func() { s.supervise(ctx) })
	}
	wg.Wait()
	return nil
}

// WaitStarted blocks until every server had its first start attempt (up,
// or failed once), or ctx ends.
func (h *Hub) WaitStarted(ctx context.Context) error {
	for _, name := range h.order {
		select {
		case <-h.servers[name].attempted:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Status lists every server's state, by name.
func (h *Hub) Status() []Status {
	out := make([]Status, 0, len(h.order))
	for _, name := range h.order {
		s := h.servers[name]
		s.mu.RLock()
		st := Status{Name: name, State: s.state, Failures: s.fails, LastError: s.lastErr, Restarts: s.restarts, PID: s.pid, InFlight: s.inFlight}
		if s.state == StateUp {
			for _, t := range s.tools {
				st.Tools = append(st.Tools, t.name)
			}
		}
		s.mu.RUnlock()
		out = append(out, st)
	}
	return out
}

// Failing lists the servers that keep failing, as "name: last error" (for
// /readyz detail).
func (h *Hub) Failing() []string {
	var out []string
	for _, st := range h.Status() {
		if st.State == StateFailing {
			out = append(out, fmt.Sprintf("%s: %s after %d attempts: %s", st.Name, st.State, st.Failures, st.LastError))
		}
	}
	return out
}

// AgentServers lists the servers an agent may use.
func (h *Hub) AgentServers(agentID string) []string { return h.agents[agentID] }

// ToolSpecs lists the tools a server offers now (empty while it is down),
// whoever asks: for doctor and inspect, not for turns.
func (h *Hub) ToolSpecs(name string) []model.Tool {
	s, ok := h.servers[name]
	if !ok {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.state != StateUp {
		return nil
	}
	out := make([]model.Tool, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, t.spec)
	}
	return out
}

// Tools lists the tools agentID's sessions may use acting for actor: those
// of its servers that are up and whose grant admits the actor. It first
// waits for the first start attempt of each of the agent's servers (each
// wait bounded by that server's Timeout, which bounds the attempt too): a
// turn right after the bot starts (a mention answered at READY, catch-up)
// gets the tools of a server that is still starting. A server that is not
// up is named in a warning with its last error, once per failure.
func (h *Hub) Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool {
	var out []model.Tool
	for _, name := range h.agents[agentID] {
		s, ok := h.servers[name]
		if !ok || h.permit(ctx, s, actor) != nil {
			continue
		}
		s.waitFirst(ctx)
		tools := h.ToolSpecs(name)
		if len(tools) == 0 {
			s.reportUnavailable(agentID)
		}
		out = append(out, tools...)
	}
	return out
}

// Unavailable lists, as "name: state: last error", the agent's servers that
// are not up once their first start attempt has ended (each wait bounded as
// in Tools): a run records them in its diagnostics, since its turn runs
// without their tools.
func (h *Hub) Unavailable(ctx context.Context, agentID string) []string {
	var out []string
	for _, name := range h.agents[agentID] {
		s, ok := h.servers[name]
		if !ok {
			continue
		}
		s.waitFirst(ctx)
		s.mu.RLock()
		state, lastErr := s.state, s.lastErr
		s.mu.RUnlock()
		if state != StateUp {
			out = append(out, fmt.Sprintf("%s: %s: %s", name, state, orNone(lastErr)))
		}
	}
	return out
}

// waitFirst waits until the server's first start attempt has ended (up
// or failed), at most its Timeout, or ctx.
func (s *server) waitFirst(ctx context.Context) {
	select {
	case <-s.attempted:
		return
	default:
	}
	select {
	case <-s.attempted:
	case <-s.h.d.After(s.cfg.Timeout):
	case <-ctx.Done():
	}
}

// reportUnavailable logs that a turn of agentID gets none of the server's
// tools because it is not up: once per failed start or crash, not per turn.
func (s *server) reportUnavailable(agentID string) {
	s.mu.Lock()
	state, lastErr, n := s.state, s.lastErr, s.restarts
	told := s.toldDown == n+1
	s.toldDown = n + 1
	s.mu.Unlock()
	if state == StateUp || told {
		return
	}
	s.h.d.Log.Warn().Str("mcp", s.cfg.Name).Str("agent", agentID).Str("state", state).Str("error", orNone(lastErr)).
		Msg("mcp server not up: a turn runs without its tools")
}

func orNone(s string) string {
	if s == "" {
		return "no answer within its timeout yet"
	}
	return s
}

func (h *Hub) permit(ctx context.Context, s *server, actor authz.Actor) error {
	if h.d.Auth == nil || s.cfg.Grant.Open() {
		return nil
	}
	return h.d.Auth.Permits(ctx, actor, s.cfg.Grant, "the "+s.cfg.Name+" tools")
}

// Call runs one tool call for agentID acting for actor. A tool's own error
// is a result ("error: ..."); a refusal is an authz.Refusal; a failed call
// (server down, timeout, protocol error) is an error with secrets redacted.
func (h *Hub) Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error) {
	name, _, ok := strings.Cut(call.Name, Separator)
	s, known := h.servers[name]
	if !ok || !known || !slices.Contains(h.agents[agentID], name) {
		return "", fmt.Errorf("tool %q is not available here", call.Name)
	}
	if err := h.permit(ctx, s, actor); err != nil {
		return "", err
	}
	start := h.d.Now()
	out, outcome, err := s.call(ctx, call)
	if h.d.Observe != nil {
		h.d.Observe.MCPToolCall(name, outcome, h.d.Now().Sub(start).Seconds())
	}
	if err != nil {
		return "", h.d.Redact.Error(fmt.Errorf("%s: %w", call.Name, err))
	}
	return out, nil
}

func (s *server) call(ctx context.Context, call model.ToolCall) (string, string, error) {
	s.mu.Lock()
	sess, state := s.sess, s.state
	var remote string
	for _, t := range s.tools {
		if t.name == call.Name {
			remote = t.remote
		}
	}
	if state == StateUp && remote != "" {
		s.inFlight++
	}
	s.mu.Unlock()
	if state != StateUp || sess == nil {
		return "", "unavailable", fmt.Errorf("server %s is %s", s.cfg.Name, state)
	}
	if remote == "" {
		return "", "unknown", errors.New("the server does not offer this tool (any more)")
	}
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	args := map[string]any{} // never null: servers validate arguments as an object
	if strings.TrimSpace(call.Arguments) != "" {
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return "", "bad-arguments", fmt.Errorf("arguments are not a JSON object: %w", err)
		}
		if args == nil { // "null"
			args = map[string]any{}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &sdk.CallToolParams{Name: remote, Arguments: args})
	switch {
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		return "", "timeout", fmt.Errorf("no answer within %s", s.cfg.Timeout)
	case err != nil:
		return "", "error", err
	}
	text := resultText(res, s.cfg.MaxResultBytes)
	if res.IsError {
		return "error: " + text, "tool-error", nil
	}
	return text, "ok", nil
}

// supervise keeps one session up until ctx ends.
func (s *server) supervise(ctx context.Context) {
	h := s.h
	log := h.d.Log.With().Str("mcp", s.cfg.Name).Logger()
	backoff := h.o.Backoff
	for {
		sess, p, err := s.start(ctx)
		var upAt time.Time
		if err == nil {
			upAt = h.d.Now()
			s.markAttempted()
			log.Info().Int("tools", len(s.ToolNames())).Msg("mcp server up")
			err = s.serve(ctx, sess)
			s.withdraw()
			s.stop(sess, p)
			if ctx.Err() != nil {
				s.setState(StateStopped, "")
				return
			}
			if h.d.Now().Sub(upAt) >= h.o.StableAfter {
				backoff = h.o.Backoff
				s.mu.Lock()
				s.fails = 0
				s.mu.Unlock()
			}
		}
		if ctx.Err() != nil {
			s.markAttempted()
			s.setState(StateStopped, "")
			return
		}
		msg := h.d.Redact.String(err.Error())
		s.mu.Lock()
		s.fails++
		s.restarts++
		fails := s.fails
		s.state = StateDown
		if fails >= h.o.FailingAfter {
			s.state = StateFailing
		}
		s.lastErr = msg
		s.mu.Unlock()
		s.markAttempted()
		if h.d.Observe != nil {
			h.d.Observe.MCPServerUp(s.cfg.Name, false)
			h.d.Observe.MCPRestart(s.cfg.Name)
		}
		ev := log.Warn()
		if fails >= h.o.FailingAfter {
			ev = log.Error()
		}
		ev.Str("error", msg).Int("failures", fails).Dur("retryIn", backoff).Msg("mcp server down; its tools are withdrawn until it is back")
		select {
		case <-ctx.Done():
			s.setState(StateStopped, "")
			return
		case <-h.d.After(backoff):
		}
		backoff = min(backoff*2, h.o.MaxBackoff)
	}
}

func (s *server) markAttempted() { s.attemptMu.Do(func() { close(s.attempted) }) }

func (s *server) setState(state, lastErr string) {
	s.mu.Lock()
	s.state = state
	if lastErr != "" {
		s.lastErr = lastErr
	}
	s.mu.Unlock()
}

// ToolNames lists the server's offered tool names.
func (s *server) ToolNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, t.name)
	}
	return out
}

// start connects and lists the tools, within the server's timeout.
func (s *server) start(ctx context.Context) (*sdk.ClientSession, *proc, error) {
	t, p, err := s.transport()
	if err != nil {
		return nil, nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentbot", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
	})
	sctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	sess, err := client.Connect(sctx, t, nil)
	if err != nil {
		p.kill()
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	tools, err := s.list(sctx, sess)
	if err != nil {
		s.stop(sess, p)
		return nil, nil, fmt.Errorf("list tools: %w", err)
	}
	s.mu.Lock()
	s.sess, s.tools, s.state, s.pid = sess, tools, StateUp, p.id()
	s.mu.Unlock()
	if s.h.d.Observe != nil {
		s.h.d.Observe.MCPServerUp(s.cfg.Name, true)
	}
	return sess, p, nil
}

// serve waits for the session to end (or ctx), refetching the tool list
// when the server says it changed.
func (s *server) serve(ctx context.Context, sess *sdk.ClientSession) error {
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return fmt.Errorf("session ended: %w", err)
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			tools, err := s.list(lctx, sess)
			cancel()
			if err != nil {
				s.h.d.Log.Warn().Str("mcp", s.cfg.Name).Str("error", s.h.d.Redact.String(err.Error())).Msg("mcp tool list refresh failed; keeping the previous list")
				continue
			}
			s.mu.Lock()
			s.tools = tools
			s.mu.Unlock()
			s.h.d.Log.Info().Str("mcp", s.cfg.Name).Int("tools", len(tools)).Msg("mcp tool list changed")
		}
	}
}

func (s *server) withdraw() {
	s.mu.Lock()
	s.sess, s.tools, s.pid = nil, nil, 0
	if s.state == StateUp {
		s.state = StateDown
	}
	s.mu.Unlock()
}

// stop closes a session within StopTimeout, then kills what is left of a
// stdio server's process group.
func (s *server) stop(sess *sdk.ClientSession, p *proc) {
	done := make(chan struct{})
	go func() { _ = sess.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.h.o.StopTimeout):
		s.h.d.Log.Warn().Str("mcp", s.cfg.Name).Msg("mcp server did not stop in time; killing it")
	}
	p.kill()
}

// list fetches the server's tools (all pages) and keeps the allowed ones.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) ([]tool, error) {
	var out []tool
	seen := map[string]bool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(s.cfg.AllowedTools) > 0 && !slices.Contains(s.cfg.AllowedTools, t.Name) {
			continue
		}
		name := qualify(s.cfg.Name, t.Name)
		if seen[name] {
			continue // the server listed a name twice
		}
		seen[name] = true
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		out = append(out, tool{name: name, remote: t.Name, spec: model.Tool{Name: name, Description: desc, Parameters: schemaOf(t.InputSchema)}})
	}
	return out, nil
}

// schemaOf passes a tool's input schema through as a JSON object; the
// providers need an object schema, so a missing type becomes "object".
func schemaOf(in any) map[string]any {
	var m map[string]any
	switch v := in.(type) {
	case map[string]any:
		m = v
	case nil:
	default:
		b, err := json.Marshal(v)
		if err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if m["type"] == "object" {
		if _, ok := m["properties"]; !ok {
			m["properties"] = map[string]any{}
		}
	}
	return m
}

// transport makes the client transport for one start.
func (s *server) transport() (sdk.Transport, *proc, error) {
	switch {
	case s.cfg.Transport != nil:
		t, err := s.cfg.Transport()
		return t, nil, err
	case s.cfg.Command != "":
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Dir = s.cfg.Dir
		cmd.Env = inheritedEnv()
		for k, v := range s.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &stderrLog{log: s.h.d.Log.With().Str("mcp", s.cfg.Name).Logger(), red: s.h.d.Redact}
		cmd.WaitDelay = time.Second // a grandchild holding stderr open does not hold up Wait
		p := newProc(cmd)
		return &trackedTransport{CommandTransport: &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, p: p, s: s}, p, nil
	case s.cfg.URL != "":
		hc := s.h.o.HTTPClient
		if hc == nil {
			hc = &http.Client{}
		}
		if len(s.cfg.Headers) > 0 {
			c := *hc
			base := c.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			c.Transport = headerTransport{base: base, headers: s.cfg.Headers}
			hc = &c
		}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1}, nil, nil
	}
	return nil, nil, errors.New("no command or url configured")
}

// inheritedEnv is what a stdio server gets of the bot's environment: what
// a program needs to run (the same list as the MCP TypeScript SDK's default
// environment, plus locale, temp dir and zone), never the rest: the bot
// token and API keys stay in the bot.
func inheritedEnv() []string {
	var out []string
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// stderrLog logs a stdio server's stderr, line by line, at debug level
// (redacted: a server may print its own environment).
type stderrLog struct {
	log  zerolog.Logger
	red  *redact.Redactor
	mu   sync.Mutex
	part []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := slices.Index(w.part, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(w.part[:i])); line != "" {
			w.log.Debug().Str("stderr", w.red.String(line)).Msg("mcp server says")
		}
		w.part = w.part[i+1:]
	}
	if len(w.part) > 4096 {
		w.part = w.part[:0]
	}
	return len(p), nil
}

// trackedTransport records the server's process group as soon as it is
// started, before the handshake (a server may start children meanwhile).
type trackedTransport struct {
	*sdk.CommandTransport
	p *proc
	s *server
}

func (t *trackedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if tr := t.s.h.d.Procs; tr != nil {
		t.p.tracked(tr.Started(context.WithoutCancel(ctx), t.p.id(), "mcp", t.s.cfg.Name))
	}
	return c, nil
}
