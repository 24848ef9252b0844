package mcp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/model"
)

func runHub(t *testing.T, h *Hub) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := h.WaitStarted(wctx); err != nil {
		t.Fatal(err)
	}
}

// A streamable HTTP server gets the configured headers on every request;
// one that refuses them is reported down without the header's value.
func TestStreamableHTTPHeaders(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	const token = "Bearer http-secret-token-1"
	var seen, refused atomic.Int32
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return f.srv }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			refused.Add(1)
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		seen.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	good := New(Options{Servers: []Server{{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": token}, Timeout: 5 * time.Second}},
		Agents: map[string][]string{"main": {"remote"}}}, Deps{Log: zerolog.Nop()})
	runHub(t, good)
	out, err := good.Call(context.Background(), "main", alice, model.ToolCall{Name: "remote__echo", Arguments: `{"message":"over http"}`})
	if err != nil || out != "Echo: over http" {
		t.Fatalf("call = %q, %v", out, err)
	}
	if seen.Load() == 0 || refused.Load() != 0 {
		t.Errorf("requests with the header %d, without %d", seen.Load(), refused.Load())
	}

	bad := New(Options{Servers: []Server{{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer wrong-secret-value"}, Timeout: 5 * time.Second}},
		Agents: map[string][]string{"main": {"remote"}}}, Deps{Log: zerolog.Nop(), Redact: redact.New("Bearer wrong-secret-value", "wrong-secret-value"), After: (&manualAfter{}).after})
	runHub(t, bad)
	st := bad.Status()[0]
	if st.State != StateDown || strings.Contains(st.LastError, "wrong-secret-value") {
		t.Errorf("status with a refused header = %+v", st)
	}
}

// A real remote server written by others: server-everything in its
// streamable HTTP mode.
func TestServerEverythingOverHTTP(t *testing.T) {
	t.Parallel()
	bin := npmtest.Bin(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "listening on port") {
				once = true
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(20 * time.Second):
		t.Fatal("server-everything did not start listening")
	}
	h := New(Options{Servers: []Server{{Name: "remote", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Timeout: 10 * time.Second}},
		Agents: map[string][]string{"main": {"remote"}}}, Deps{Log: zerolog.Nop()})
	runHub(t, h)
	out, err := h.Call(context.Background(), "main", alice, model.ToolCall{Name: "remote__echo", Arguments: `{"message":"remote hello"}`})
	if err != nil || !strings.Contains(out, "remote hello") {
		t.Fatalf("echo over HTTP = %q, %v (status %+v)", out, err, h.Status())
	}
}
