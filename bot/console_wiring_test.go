package bot

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
)

// The console is served by the bot's own HTTP server, behind http.token.
func TestConsoleServedByBot(t *testing.T) {
	const token = "wiring-test-token"
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.Nop(), Configure: func(c *config.Config) {
		c.HTTP.Listen, c.HTTP.Token = "127.0.0.1:0", token
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.close()
	var addr string
	select {
	case addr = <-h.app.httpAddr:
	case <-ctx.Done():
		t.Fatal("no HTTP address")
	}
	do := func(method, path, auth string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", "/", token); code != 200 || !strings.Contains(body, "ready") {
		t.Errorf("GET / = %d\n%.300s", code, body)
	}
	for _, p := range []string{"/bindings", "/jobs", "/sessions", "/deliveries"} {
		if code, _ := do("GET", p, token); code != 200 {
			t.Errorf("GET %s = %d", p, code)
		}
	}
	if code, _ := do("GET", "/", ""); code != http.StatusUnauthorized {
		t.Errorf("GET / without token = %d", code)
	}
	if code, _ := do("POST", "/", token); code != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d", code)
	}
	if code, body := do("GET", "/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
}

// A non-loopback listener without a token stops the bot before it starts.
func TestConsoleRefusesOpenListener(t *testing.T) {
	cfg := config.Default()
	cfg.Store.Path = t.TempDir() + "/bot.db"
	cfg.HTTP.Listen = "0.0.0.0:9464"
	_, err := New(Options{Config: cfg}, Deps{Log: zerolog.Nop()})
	if err == nil || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "http.listen 0.0.0.0:9464 is not loopback: set http.token") {
		t.Fatalf("New = %v", err)
	}
}
