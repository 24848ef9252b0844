package bot

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestE2EClaudeCodeACP: the real Claude Code ACP adapter
// (@zed-industries/claude-code-acp) against the loopback Anthropic fake,
// in the sandbox, with the terminal on: its Bash tool arrives as a
// terminal/create, is shown with Allow/Deny (a stranger's click refused,
// the binder allows), runs in the sandbox (a write outside the workspace
// and a network connect fail), and its output is in the thread and in the
// agent's next request.
func TestE2EClaudeCodeACP(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	claude := npmtest.Bin(t, "claude-code-acp")
	llm := modeltest.NewAnthropicFake(t, "")
	home := t.TempDir()
	guard, attempts := npmtest.NetGuard(t, home)
	here, _ := os.Getwd()
	outside, err := os.MkdirTemp(here, "claude-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(llm.URL, "http://"))
	probe := "echo claude-probe-ran; touch " + outside + "/escaped 2>/dev/null || echo write-outside-refused; " +
		`python3 -c 'import socket; socket.create_connection(("127.0.0.1", ` + port + `), 5)' 2>/dev/null || echo connect-refused`
	llm.Respond(func(b modeltest.Body) modeltest.Reply {
		raw, _ := json.Marshal(b)
		s := string(raw)
		switch {
		case !strings.Contains(s, "mcp__acp__Bash"):
			return modeltest.Reply{Text: "ok"} // Claude Code's side requests (titles, topics)
		case toolResult(b, "toolu_probe") != "":
			return modeltest.Reply{Text: "The probe ran."}
		case strings.Contains(s, "run the probe"):
			args, _ := json.Marshal(map[string]any{"command": probe, "timeout": 60000, "description": "Probe the sandbox"})
			return modeltest.Reply{Text: "Running the probe.", ToolCalls: []model.ToolCall{{ID: "toolu_probe", Name: "mcp__acp__Bash", Arguments: string(args)}}}
		}
		return modeltest.Reply{Text: "Hello from the fake Claude."}
	})
	h, _ := acpBot(t, "claude", func(h *harness, c *config.ACPAgentConfig) {
		c.Command, c.Terminal, c.CommandTimeout = claude, true, time.Hour
		c.Env = map[string]string{"HOME": home, "ANTHROPIC_API_KEY": "fake-key-not-checked", "ANTHROPIC_BASE_URL": llm.URL,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
			"NODE_OPTIONS": guard["NODE_OPTIONS"], "NETGUARD_LOG": guard["NETGUARD_LOG"]}
	})
	t.Cleanup(func() {
		if a := attempts(); len(a) > 0 {
			t.Errorf("Claude Code tried to reach outside: %q", a)
		}
		if t.Failed() {
			t.Logf("fake Anthropic rejections: %q; %d requests", llm.Rejections(), len(llm.Requests()))
		}
	})
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	thread := acpSpawn(t, h, "claude", "")
	acpMessage(t, h, thread.ID, "is bound to this thread")
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range h.emu.Messages(thread.ID) {
				t.Logf("thread: %q buttons %+v", m.Content, m.Buttons())
			}
		}
	})
	adSay(t, h, thread.ID, "Please run the probe.")
	acpFirstAnswer(t, h, thread.ID, "Running the probe.")
	// Claude Code asks first (its own permission), then the bot (approve: ask).
	clicked := map[string]bool{}
	var ours bool
	waitUntil(t, h, "the command's approval", func() bool {
		for _, m := range h.emu.Messages(thread.ID) {
			if !strings.Contains(m.Content, "asks permission") || len(m.Buttons()) == 0 || clicked[m.ID] {
				continue
			}
			if strings.Contains(m.Content, "asks permission: run `") {
				ours = true
				if r := acpClick(t, h, m, bob.ID, "Allow"); !r.Ephemeral || !strings.Contains(r.Content, "Only <@"+h.alice.ID+">") {
					t.Fatalf("a stranger's click answered %+v", r)
				}
				acpClick(t, h, m, h.alice.ID, "Allow")
				clicked[m.ID] = true
				return true
			}
			label := ""
			for _, b := range m.Buttons() {
				if strings.HasPrefix(b.Label, "Allow") && label == "" {
					label = b.Label
				}
			}
			acpClick(t, h, m, h.alice.ID, label)
			clicked[m.ID] = true
		}
		return false
	})
	if !ours {
		t.Fatal("the command was never shown for approval")
	}
	acpMessage(t, h, thread.ID, "The probe ran.")
	cmd := acpMessage(t, h, thread.ID, "💻 `")
	if !strings.Contains(cmd.Content, "claude-probe-ran") {
		t.Errorf("command message %q lacks its output", cmd.Content)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("the command wrote outside the workspace")
	}
	result := ""
	for _, b := range llm.Requests() {
		if r := toolResult(b, "toolu_probe"); r != "" {
			result = r
		}
	}
	for _, want := range []string{"claude-probe-ran", "write-outside-refused", "connect-refused"} {
		if !strings.Contains(result, want) {
			t.Errorf("the command's result in the agent's next request %q lacks %q", result, want)
		}
	}
	waitUntil(t, h, "the command's message to show its exit", func() bool {
		m, _ := h.emu.Message(cmd.ID)
		return strings.Contains(m.Content, "· ✅ exit 0")
	})
	finishBot(t, h, h.general.ID, thread.ID)
}

// toolResult is the text of the tool_result answering tool use id in a
// Messages API request ("" when it holds none).
func toolResult(b modeltest.Body, id string) string {
	msgs, _ := b["messages"].([]any)
	var out strings.Builder
	for _, m := range msgs {
		blocks, _ := m.(map[string]any)["content"].([]any)
		for _, bl := range blocks {
			blk, _ := bl.(map[string]any)
			if blk["type"] != "tool_result" || blk["tool_use_id"] != id {
				continue
			}
			switch c := blk["content"].(type) {
			case string:
				out.WriteString(c)
			case []any:
				for _, part := range c {
					if p, ok := part.(map[string]any); ok {
						t, _ := p["text"].(string)
						out.WriteString(t)
					}
				}
			}
		}
	}
	return out.String()
}
