//go:build unix

package mcp

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/internal/npmtest"
)

// A server that ignores both the closed stdin and SIGTERM is still gone,
// with everything it started, within the bounded shutdown.
func TestShutdownBoundedForStubbornServer(t *testing.T) {
	t.Parallel()
	bin := npmtest.Bin(t, "mcp-server-everything")
	// sh ignores TERM (and so does what it execs): after the real server
	// exits on EOF, sh waits deaf to all but SIGKILL, and its child "sleep"
	// outlives sh unless the whole group is killed.
	script := "trap '' TERM; " + bin + " stdio; sleep 1000 & wait"
	h := New(Options{Servers: []Server{{Name: "stubborn", Command: "sh", Args: []string{"-c", script}, Timeout: 20 * time.Second}},
		Agents: map[string][]string{"main": {"stubborn"}}, StopTimeout: 4 * time.Second}, Deps{Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	if err := h.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	st := h.Status()[0]
	if st.State != StateUp || st.PID == 0 {
		t.Fatalf("status = %+v", st)
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after shutdown (kill 0: %v)", st.PID, err)
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	}
	// The group's last member (killed) is reaped by init, asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(-st.PID, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("process group %d still exists after shutdown (kill 0: %v)", st.PID, err)
			_ = syscall.Kill(-st.PID, syscall.SIGKILL)
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel: no event to wait on
	}
}
