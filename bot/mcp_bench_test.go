package bot

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/tools/mcp"
)

// BenchmarkMCPBotStartToolsReady measures the time from the bot's start
// (newApp and Run, against the emulator) to the tools of three MCP servers
// (two server-everything, one server-filesystem) being ready.
func BenchmarkMCPBotStartToolsReady(b *testing.B) {
	every := config.MCPServerConfig{Command: npmtest.Bin(b, "mcp-server-everything"), Args: []string{"stdio"}, Timeout: 20 * time.Second, MaxResultBytes: config.DefaultMCPMaxResultBytes}
	files := config.MCPServerConfig{Command: npmtest.Bin(b, "mcp-server-filesystem"), Args: []string{b.TempDir()}, Timeout: 20 * time.Second, MaxResultBytes: config.DefaultMCPMaxResultBytes}
	var total time.Duration
	for b.Loop() {
		h, err := newHarness(harnessOptions{Dir: b.TempDir(), Log: zerolog.Nop(), Configure: func(c *config.Config) {
			c.MCP.Servers = map[string]config.MCPServerConfig{"a": every, "b": every, "c": files}
			c.Agents[0].MCP = []string{"a", "b", "c"}
		}})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := h.start(b.Context()); err != nil {
			b.Fatal(err)
		}
		for {
			up := 0
			for _, st := range h.app.tools.Status() {
				if st.State == mcp.StateUp {
					up++
				}
			}
			if up == 3 {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatal("tools not ready")
			}
			time.Sleep(time.Millisecond) // a benchmark's poll, not a test's wait
		}
		total += time.Since(start)
		b.StopTimer()
		_ = h.close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-tools-ready")
}
