package mcp

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/model"
)

// BenchmarkStdioEchoCall measures one MCP tool call through the hub over
// stdio against @modelcontextprotocol/server-everything's echo tool, and
// reports the median and p99 latency.
func BenchmarkStdioEchoCall(b *testing.B) {
	bin := npmtest.Bin(b, "mcp-server-everything")
	h := New(Options{Servers: []Server{{Name: "every", Command: bin, Args: []string{"stdio"}, Timeout: 20 * time.Second}},
		Agents: map[string][]string{"main": {"every"}}}, Deps{Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := h.WaitStarted(ctx); err != nil || h.Status()[0].State != StateUp {
		b.Fatalf("server-everything did not start: %v %+v", err, h.Status())
	}
	call := model.ToolCall{Name: "every__echo", Arguments: `{"message":"ping"}`}
	actor := authz.Actor{UserID: "u"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := h.Call(ctx, "main", actor, call); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		b.ReportMetric(float64(lat[n/2].Microseconds()), "median-µs")
		b.ReportMetric(float64(lat[min(n-1, n*99/100)].Microseconds()), "p99-µs")
	}
}

// BenchmarkStartThreeServers measures the time from a hub's start to all
// three servers' tools being ready (two server-everything, one
// server-filesystem), processes started fresh each iteration.
func BenchmarkStartThreeServers(b *testing.B) {
	every := npmtest.Bin(b, "mcp-server-everything")
	files := npmtest.Bin(b, "mcp-server-filesystem")
	dir := b.TempDir()
	for b.Loop() {
		h := New(Options{Servers: []Server{
			{Name: "a", Command: every, Args: []string{"stdio"}, Timeout: 20 * time.Second},
			{Name: "b", Command: every, Args: []string{"stdio"}, Timeout: 20 * time.Second},
			{Name: "c", Command: files, Args: []string{dir}, Timeout: 20 * time.Second},
		}}, Deps{Log: zerolog.Nop()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = h.Run(ctx); close(done) }()
		if err := h.WaitStarted(ctx); err != nil {
			b.Fatal(err)
		}
		for _, st := range h.Status() {
			if st.State != StateUp {
				b.Fatalf("%s did not start: %s", st.Name, st.LastError)
			}
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
}
