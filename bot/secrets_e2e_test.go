package bot

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/redact"
)

// logSink is a log destination tests can wait on.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return n, err
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// wait blocks until the log holds sub (at most 30 s).
func (l *logSink) wait(t *testing.T, sub string) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		l.mu.Lock()
		has, ch := strings.Contains(l.buf.String(), sub), l.changed
		l.mu.Unlock()
		if has {
			return
		}
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatalf("log never said %q", sub)
		case <-limit.C:
			t.Fatalf("log never said %q; it holds:\n%s", sub, l.String())
		}
	}
}

// refusingTransport fails every request whose path contains one of the
// armed fragments with a connection-refused network error, as a dead
// network would; other requests go to the emulator.
type refusingTransport struct {
	mu    sync.Mutex
	armed []string
	hits  int
}

func (r *refusingTransport) arm(fragments ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = fragments
}

func (r *refusingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	for _, f := range r.armed {
		if strings.Contains(req.URL.Path, f) {
			r.hits++
			r.mu.Unlock()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
	}
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// TestNoSecretLeavesUnderNetworkFailures runs the real bot with the process
// logger (NewLogger) while webhook executes and interaction callbacks fail
// with network errors, and greps every log line, every message and
// interaction response displayed, and the inspect output for the bot
// token, the webhook token, the interaction tokens and the model API key
// (invariant 14). On the old code the url.Error text (with
// /webhooks/{id}/{token} and /interactions/{id}/{token}/callback) reached
// the log from the subagent, command and sender paths.
func TestNoSecretLeavesUnderNetworkFailures(t *testing.T) {
	t.Parallel()
	const apiKey = "sk-test-model-api-key-0123456789abcdef"
	logs := newLogSink()
	red := redact.New()
	log := NewLogger(config.LogConfig{Level: "debug", Format: "json"}, logs, red)
	rt := &refusingTransport{}
	// The model accepts the key: the subagent's task waits at the gate
	// until the webhook refusal is armed (with another key its call failed
	// at once, and under load that failure's completion could be delivered
	// before the refusal was armed).
	g := newAdGatedModelKey(t, apiKey)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, BaseTransport: rt, Configure: g.configure})
	if err != nil {
		t.Fatal(err)
	}
	red.Add(h.cfg.Secrets()...) // as cmdRun does
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Webhook execute: the subagent's completion cannot reach its thread.
	thread := adSpawnThread(t, h, "[hold] leaky", "leaky")
	hooks := h.emu.Webhooks(h.general.ID)
	if len(hooks) != 1 {
		t.Fatalf("webhooks: %+v", hooks)
	}
	// The thread's webhook (not the application's, whose @original the
	// /spawn reply may still be reading) and every interaction callback.
	rt.arm("/webhooks/"+hooks[0].ID+"/", "/interactions/")
	g.release()
	logs.wait(t, "completion not delivered")

	// Interaction callbacks: an ephemeral reply and a public one (which
	// stays pending: a callback whose outcome is unknown is never re-posted
	// as a channel message, invariant 15).
	agents := adInvoke(t, h, h.general.ID, "agents")
	logs.wait(t, "ephemeral reply failed")
	reset := adInvoke(t, h, h.general.ID, "reset")
	logs.wait(t, "public command reply failed")
	rt.arm()

	secrets := map[string]string{"bot token": h.emu.Token(), "model API key": apiKey,
		"interaction token (/agents)": agents.Token, "interaction token (/reset)": reset.Token}
	for _, hook := range h.emu.Webhooks(h.general.ID) {
		secrets["webhook token "+hook.ID] = hook.Token
	}
	var shown strings.Builder
	for _, ch := range []string{h.general.ID, thread} {
		for _, m := range h.emu.Messages(ch) {
			shown.WriteString(m.Content + "\n")
		}
	}
	st := finishBot(t, h, h.general.ID, thread)
	var inspected bytes.Buffer
	in := inspector{st, redact.New(h.cfg.Secrets()...)}
	for _, what := range []string{"bindings", "jobs", "runs"} {
		if err := in.write(context.Background(), &inspected, what, nil, true); err != nil {
			t.Fatalf("inspect %s: %v", what, err)
		}
	}
	if err := in.write(context.Background(), &inspected, "transcript", []string{adSessionKey(h.general.ID)}, true); err != nil {
		t.Fatalf("inspect transcript: %v", err)
	}

	out := logs.String()
	if !strings.Contains(out, "[redacted]") {
		t.Errorf("no failing URL was logged (redacted); the test did not exercise the path:\n%s", out)
	}
	for name, s := range secrets {
		if s == "" {
			t.Fatalf("%s unknown", name)
		}
		for where, text := range map[string]string{"the log": out, "a displayed message": shown.String(), "inspect output": inspected.String()} {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s appears in %s: ...%s...", name, where, text[max(0, i-200):min(len(text), i+len(s)+50)])
			}
		}
	}
}

// TestLoggerRedactsConfiguredSecrets: the process logger redacts the
// configured secrets and token-shaped URL segments from every line,
// whatever logged them, in both formats.
func TestLoggerRedactsConfiguredSecrets(t *testing.T) {
	cfg := config.Default()
	cfg.Discord.Token = "configured-bot-token-value"
	cfg.HTTP.Token = "console-token-value"
	cfg.Store.DSN = "postgres://bot:dsn-password-value@db:5432/agentbot"
	mc := cfg.Models[config.DefaultModelName]
	mc.APIKey = "model-key-value-123"
	cfg.Models[config.DefaultModelName] = mc
	for _, format := range []string{"json", "console"} {
		var buf bytes.Buffer
		log := NewLogger(config.LogConfig{Level: "info", Format: format}, &buf, redact.New(cfg.Secrets()...))
		err := errors.Join(&url.Error{Op: "Post", URL: "https://discord.com/api/v9/webhooks/1/hook-token-value/messages/@original", Err: errors.New("EOF")},
			errors.New("connect "+cfg.Store.DSN+" as "+cfg.Discord.Token))
		log.Error().Err(err).Str("key", "model-key-value-123").Str("console", "console-token-value").Msg("dsn-password-value")
		for _, s := range []string{"configured-bot-token-value", "console-token-value", "dsn-password-value", "model-key-value-123", "hook-token-value"} {
			if strings.Contains(buf.String(), s) {
				t.Errorf("%s log line holds %q: %s", format, s, buf.String())
			}
		}
	}
}
