package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestACPConfig(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"GEMINI_API_KEY": "gm-secret-value"})
	good := "acp:\n  agents:\n    gemini:\n      command: gemini\n      args: [--acp]\n      env: {GEMINI_API_KEY: \"${GEMINI_API_KEY}\", MODE: plain}\n      workspace: data/acp\n      users: [\"123456789012345678\"]\n"
	cfg, err := LoadBytes("t.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.ACP.Agents["gemini"]
	if g.Command != "gemini" || g.Env["GEMINI_API_KEY"] != "gm-secret-value" || g.IdleShutdown != 30*time.Minute || g.MaxSessions != 4 ||
		g.Terminal || g.Sandbox != "bwrap" || g.Network || g.CommandTimeout != 10*time.Minute || g.Approve != "ask" {
		t.Errorf("decoded %+v", g)
	}
	secrets := cfg.Secrets()
	if !slices.Contains(secrets, "gm-secret-value") || !slices.Contains(secrets, "plain") {
		t.Errorf("secrets %q: want every env value (a literal may be a credential too)", secrets)
	}
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      comand: x\n", "acp.agents.gemini.comand"},
		{"collision", "agents:\n  - id: gemini\nacp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n", "acp.agents.gemini collides with agents[0].id \"gemini\""},
		{"no command", "acp:\n  agents:\n    gemini:\n      workspace: w\n", "acp.agents.gemini.command: is required"},
		{"no workspace", "acp:\n  agents:\n    gemini:\n      command: gemini\n", "acp.agents.gemini.workspace: is required"},
		{"bad user", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      users: [bob]\n", "acp.agents.gemini.users[0]"},
		{"bad sandbox", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      sandbox: docker\n", "acp.agents.gemini.sandbox"},
		{"network without sandbox", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      sandbox: none\n      network: true\n", "acp.agents.gemini.network"},
		{"negative timeout", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      commandTimeout: -1s\n", "acp.agents.gemini.commandTimeout"},
		{"bad approve", "acp:\n  agents:\n    gemini:\n      command: gemini\n      workspace: w\n      approve: always\n", "acp.agents.gemini.approve"},
		{"bad name", "acp:\n  agents:\n    Gem:\n      command: gemini\n      workspace: w\n", "acp.agents.Gem"},
	}
	for _, c := range cases {
		_, err := LoadBytes("t.yaml", []byte(c.yaml), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// A bad file never echoes the secret.
	_, err = LoadBytes("t.yaml", []byte("acp:\n  agents:\n    gemini:\n      command: gemini\n      env: {K: \"${GEMINI_API_KEY}\"}\n      workspace: [gm-secret-value]\n"), env)
	if err == nil || strings.Contains(err.Error(), "gm-secret-value") {
		t.Errorf("err %v", err)
	}
}
