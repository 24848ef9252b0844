package bot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/tools/mcp"
)

// MCP end to end: the real bot against the emulator, with real MCP servers
// written by others (@modelcontextprotocol/server-filesystem and
// server-everything from npm, installed by `make npm`), and a scripted
// model that follows the echo grammar ("!tool <name> <json>" lines call
// tools; tool results are summarised in the reply).

func echoModel() *modeltest.Scripted {
	return &modeltest.Scripted{Fallback: func(req model.Request) (model.Response, error) {
		return echo.New().Complete(context.Background(), req)
	}}
}

// pollUntil waits for a condition of the MCP hub (not an emulator change).
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func serverStatus(h *harness, name string) mcp.Status {
	for _, st := range h.app.tools.Status() {
		if st.Name == name {
			return st
		}
	}
	return mcp.Status{}
}

// waitToolsUp waits until every configured server is up.
func waitToolsUp(t *testing.T, h *harness) {
	t.Helper()
	pollUntil(t, "mcp servers up", func() bool {
		for _, st := range h.app.tools.Status() {
			if st.State != mcp.StateUp {
				return false
			}
		}
		return true
	})
}

func toolNamesOf(req model.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

// botReplies are the bot's messages in a channel.
func botReplies(h *harness, channelID string) []string {
	var out []string
	for _, m := range h.emu.Messages(channelID) {
		if m.Author.ID == h.emu.BotUserID() {
			out = append(out, m.Content)
		}
	}
	return out
}

func filesServer(t *testing.T, dir string) config.MCPServerConfig {
	return config.MCPServerConfig{Command: npmtest.Bin(t, "mcp-server-filesystem"), Args: []string{dir},
		Timeout: 20 * time.Second, MaxResultBytes: config.DefaultMCPMaxResultBytes}
}

func everythingServer(t *testing.T) config.MCPServerConfig {
	return config.MCPServerConfig{Command: npmtest.Bin(t, "mcp-server-everything"), Args: []string{"stdio"},
		Timeout: 20 * time.Second, MaxResultBytes: config.DefaultMCPMaxResultBytes}
}

// A mention whose model calls a filesystem tool on a temporary directory
// gets the file's content back and replies with it; the tool round is
// neither displayed nor in the transcript (Rule 1 holds).
func TestMCPE2EFilesystemRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the launch code is 4711"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := filesServer(t, dir)
	p := echoModel()
	h := startBot(t, p, func(c *config.Config) {
		c.MCP.Servers = map[string]config.MCPServerConfig{"files": fs}
		c.Agents[0].MCP = []string{"files"}
	})
	waitToolsUp(t, h)
	path := filepath.Join(dir, "notes.txt")
	text := fmt.Sprintf("<@%s> what does it say?\n!tool files__read_text_file {\"path\":%q}", h.emu.BotUserID(), path)
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply", func() bool { return len(botReplies(h, h.general.ID)) == 1 })
	reply := botReplies(h, h.general.ID)[0]
	if !strings.Contains(reply, "files__read_text_file: the launch code is 4711") {
		t.Errorf("reply = %q, want the file's content", reply)
	}
	reqs := p.Requests()
	if len(reqs) != 2 || !slices.Contains(toolNamesOf(reqs[0]), "files__read_text_file") {
		t.Errorf("model calls %d; tools offered %v", len(reqs), toolNamesOf(reqs[0]))
	}
	for _, tl := range reqs[0].Tools {
		if !mcp.ValidName(tl.Name) {
			t.Errorf("tool name %q breaks the providers' rule", tl.Name)
		}
		if tl.Name == "files__read_text_file" {
			props, _ := tl.Parameters["properties"].(map[string]any)
			if _, ok := props["path"]; !ok {
				t.Errorf("read_text_file schema not passed through: %v", tl.Parameters)
			}
		}
	}
	if n := len(h.emu.Messages(h.general.ID)); n != 2 {
		t.Errorf("%d messages in #general, want the mention and the reply", n)
	}
	finishBot(t, h, h.general.ID)
}

// A server killed while a tool call runs: the call errors, the turn still
// answers (the model read the error), the server is restarted, and its
// tools work again.
func TestMCPE2EServerKilledMidTurn(t *testing.T) {
	every := everythingServer(t)
	h := startBot(t, echoModel(), func(c *config.Config) {
		c.MCP.Servers = map[string]config.MCPServerConfig{"every": every}
		c.Agents[0].MCP = []string{"every"}
	})
	waitToolsUp(t, h)
	first := serverStatus(h, "every")
	text := fmt.Sprintf("<@%s> slow one\n!tool every__trigger-long-running-operation {\"duration\":60,\"steps\":60}", h.emu.BotUserID())
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the call in flight", func() bool { return serverStatus(h, "every").InFlight == 1 })
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply", func() bool { return len(botReplies(h, h.general.ID)) == 1 })
	if reply := botReplies(h, h.general.ID)[0]; !strings.Contains(reply, "every__trigger-long-running-operation: error: ") {
		t.Errorf("reply = %q, want the tool's error", reply)
	}
	pollUntil(t, "the restart", func() bool {
		st := serverStatus(h, "every")
		return st.State == mcp.StateUp && st.PID != first.PID
	})
	if st := serverStatus(h, "every"); st.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", st.Restarts)
	}
	text = fmt.Sprintf("<@%s> again\n!tool every__echo {\"message\":\"back again\"}", h.emu.BotUserID())
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the second reply", func() bool { return len(botReplies(h, h.general.ID)) == 2 })
	if reply := botReplies(h, h.general.ID)[1]; !strings.Contains(reply, "Echo: back again") {
		t.Errorf("reply after restart = %q", reply)
	}
	finishBot(t, h, h.general.ID)
}

// A user the server's users list does not name never sees its tools in the
// model request (and a call naming one anyway runs nothing); alice, who is
// listed, does.
func TestMCPE2EDisallowedUserNotOffered(t *testing.T) {
	every := everythingServer(t)
	p := echoModel()
	var aliceID string
	h := startBot(t, p, func(c *config.Config) {
		// The harness seeds alice before configuring: her id is known here.
		c.MCP.Servers = map[string]config.MCPServerConfig{"every": every}
		c.Agents[0].MCP = []string{"every"}
	})
	aliceID = h.alice.ID
	_ = h.stop()
	s := h.cfg.MCP.Servers["every"]
	s.Users = []string{aliceID}
	h.cfg.MCP.Servers["every"] = s
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitToolsUp(t, h)
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("<@%s> hi\n!tool every__echo {\"message\":\"leak\"}", h.emu.BotUserID())
	if _, err := h.emu.UserSay(h.general.ID, bob.ID, text); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "bob's reply", func() bool { return len(botReplies(h, h.general.ID)) == 1 })
	if _, err := h.emu.UserSay(h.general.ID, aliceID, text); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "alice's reply", func() bool { return len(botReplies(h, h.general.ID)) == 2 })
	reqs := p.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d model calls", len(reqs))
	}
	for _, name := range toolNamesOf(reqs[0]) {
		if strings.HasPrefix(name, "every__") {
			t.Errorf("bob was offered %s", name)
		}
	}
	if !slices.Contains(toolNamesOf(reqs[2]), "every__echo") {
		t.Errorf("alice was not offered every__echo: %v", toolNamesOf(reqs[2]))
	}
	replies := botReplies(h, h.general.ID)
	if strings.Contains(replies[0], "Echo: leak") || !strings.Contains(replies[0], "not available here") {
		t.Errorf("bob's reply = %q", replies[0])
	}
	if !strings.Contains(replies[1], "Echo: leak") {
		t.Errorf("alice's reply = %q", replies[1])
	}
	finishBot(t, h, h.general.ID)
}

// A subagent gets its agent's MCP tools (acting for its spawner) and none
// of the bot's orchestration tools.
func TestMCPE2ESubagentGetsAgentTools(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "task.txt")
	if err := os.WriteFile(path, []byte("subagent found 99 red balloons"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := filesServer(t, dir)
	p := echoModel()
	h := startBot(t, p, func(c *config.Config) {
		c.MCP.Servers = map[string]config.MCPServerConfig{"files": fs}
		c.Agents[0].MCP = []string{"files"}
	})
	waitToolsUp(t, h)
	task := fmt.Sprintf("read the file\n!tool files__read_text_file {\"path\":%q}", path)
	text := fmt.Sprintf("<@%s> delegate\n!tool spawn_subagent {\"task\":%q,\"label\":\"reader\",\"thread\":false}", h.emu.BotUserID(), task)
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the completion", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "subagent found 99 red balloons") == 1
	})
	var sub *model.Request
	for _, r := range p.Requests() {
		if strings.Contains(r.System, "You are a subagent") {
			sub = &r
			break
		}
	}
	if sub == nil {
		t.Fatal("no subagent model call")
	}
	names := toolNamesOf(*sub)
	if !slices.Contains(names, "files__read_text_file") {
		t.Errorf("subagent tools %v lack files__read_text_file", names)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "files__") {
			t.Errorf("subagent offered %s (an orchestration tool)", n)
		}
	}
	finishBot(t, h, h.general.ID)
}

// A server that keeps failing to start is listed in /readyz (which still
// answers 200: the bot works without it) and counted in the metrics, and
// its env values never show there.
func TestMCPE2EFailingServerReported(t *testing.T) {
	h := startBot(t, nil, func(c *config.Config) {
		c.HTTP.Listen = "127.0.0.1:0"
		c.MCP.Servers = map[string]config.MCPServerConfig{"broken": {Command: filepath.Join(t.TempDir(), "no-such-server"),
			Env: map[string]string{"API_KEY": "mcp-env-secret-42"}, Timeout: 5 * time.Second, MaxResultBytes: config.DefaultMCPMaxResultBytes}}
		c.Agents[0].MCP = []string{"broken"}
	})
	var addr string
	select {
	case addr = <-h.app.httpAddr:
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP server did not start")
	}
	pollUntil(t, "the server failing", func() bool { return serverStatus(h, "broken").State == mcp.StateFailing })
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/readyz")
	if code != http.StatusOK || !strings.Contains(body, "mcp broken: failing after ") || !strings.Contains(body, "no such file or directory") {
		t.Errorf("/readyz = %d %q", code, body)
	}
	_, metricsBody := get("/metrics")
	if !strings.Contains(metricsBody, `agentbot_mcp_server_up{server="broken"} 0`) || !strings.Contains(metricsBody, `agentbot_mcp_server_restarts_total{server="broken"}`) {
		t.Errorf("metrics lack the MCP server's state")
	}
	if strings.Contains(body+metricsBody, "mcp-env-secret-42") {
		t.Error("an env value leaked")
	}
	finishBot(t, h, h.general.ID)
}
