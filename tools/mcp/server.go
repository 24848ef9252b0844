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
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/model"
)

// A server's session: started (a process or an HTTP connection), supervised (restarted with backoff), its tools
// listed, and stopped.

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
