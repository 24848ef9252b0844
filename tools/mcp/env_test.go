package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/model"
)

// A stdio server gets its configured env and the basics a program needs
// (PATH, HOME), never the rest of the bot's environment: the bot token and
// API keys stay in the bot (invariant 14). server-everything's get-env tool
// prints what the server process sees.
func TestStdioServerEnvIsolated(t *testing.T) {
	bin := npmtest.Bin(t, "mcp-server-everything")
	t.Setenv("DISCORD_TOKEN", "bot-token-must-not-leak")
	t.Setenv("OPENAI_API_KEY", "sk-must-not-leak-either-000")
	h := New(Options{Servers: []Server{{Name: "every", Command: bin, Args: []string{"stdio"}, Env: map[string]string{"SERVER_KEY": "given-to-the-server"}, Timeout: 20 * time.Second, MaxResultBytes: 1 << 20}},
		Agents: map[string][]string{"main": {"every"}}}, Deps{Log: zerolog.Nop()})
	runHub(t, h)
	out, err := h.Call(context.Background(), "main", alice, model.ToolCall{Name: "every__get-env"})
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"bot-token-must-not-leak", "sk-must-not-leak-either-000", "DISCORD_TOKEN"} {
		if strings.Contains(out, leak) {
			t.Errorf("the server saw %q", leak)
		}
	}
	for _, want := range []string{`"SERVER_KEY": "given-to-the-server"`, `"PATH"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the server's env lacks %s", want)
		}
	}
}
