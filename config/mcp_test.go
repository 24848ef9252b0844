package config

import (
	"strings"
	"testing"
	"time"
)

func TestMCPConfig(t *testing.T) {
	t.Parallel()
	yaml := `agents:
  - id: main
    mcp: [files, remote]
mcp:
  servers:
    files:
      command: npx
      args: [-y, "@modelcontextprotocol/server-filesystem", /srv/shared]
      env: {API_KEY: "${FILES_KEY}"}
    remote:
      url: https://mcp.example.com/mcp
      headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}
      timeout: 5s
      allowedTools: [search]
      users: ["123456789012345678"]
      operatorsOnly: true
`
	cfg := mustLoad(t, yaml, map[string]string{"FILES_KEY": "files-secret-1", "REMOTE_TOKEN": "remote-secret-2"})
	f, r := cfg.MCP.Servers["files"], cfg.MCP.Servers["remote"]
	if f.Command != "npx" || len(f.Args) != 3 || f.Env["API_KEY"] != "files-secret-1" || f.Timeout != DefaultMCPTimeout || f.MaxResultBytes != DefaultMCPMaxResultBytes {
		t.Errorf("files = %+v", f)
	}
	if r.URL == "" || r.Headers["Authorization"] != "Bearer remote-secret-2" || r.Timeout != 5*time.Second || !r.OperatorsOnly || r.AllowedTools[0] != "search" {
		t.Errorf("remote = %+v", r)
	}
	if got := cfg.Agents[0].MCP; len(got) != 2 {
		t.Errorf("agents[0].mcp = %v", got)
	}
	secrets := strings.Join(cfg.Secrets(), "\n")
	for _, s := range []string{"files-secret-1", "Bearer remote-secret-2", "remote-secret-2"} {
		if !strings.Contains(secrets, s) {
			t.Errorf("Secrets() lacks %q", s)
		}
	}
}

func TestMCPBadConfigs(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "mcp:\n  servers:\n    files:\n      command: x\n      cmd: y\n", `test.yaml:5: mcp.servers.files.cmd: unknown key`},
		{"neither", "mcp:\n  servers:\n    files:\n      timeout: 3s\n", "mcp.servers.files: needs command"},
		{"both", "mcp:\n  servers:\n    files:\n      command: x\n      url: https://a.example/mcp\n", "mcp.servers.files.url: set either command (stdio) or url (HTTP), not both"},
		{"bad name", "mcp:\n  servers:\n    my_files:\n      command: x\n", `mcp.servers.my_files: "my_files" is not a server name`},
		{"bad url", "mcp:\n  servers:\n    r:\n      url: ftp://x\n", "mcp.servers.r.url: \"ftp://x\" is not an http:// or https:// URL"},
		{"headers on stdio", "mcp:\n  servers:\n    r:\n      command: x\n      headers: {A: b}\n", "mcp.servers.r.headers: headers are for HTTP servers"},
		{"zero timeout", "mcp:\n  servers:\n    r:\n      command: x\n      timeout: 0s\n", "mcp.servers.r.timeout: must be more than 0"},
		{"bad user", "mcp:\n  servers:\n    r:\n      command: x\n      users: [bob]\n", `mcp.servers.r.users[0]: "bob" is not a Discord id`},
		{"agent names unknown server", "agents:\n  - id: main\n    mcp: [nope]\nmcp:\n  servers:\n    files: {command: x}\n", `agents[0].mcp[0]: "nope" is not defined under mcp.servers; defined servers: files`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// A header's value is never echoed by a config error, even when the file is otherwise wrong.
func TestMCPSecretNeverInErrors(t *testing.T) {
	t.Parallel()
	_, err := load(t, "mcp:\n  servers:\n    r:\n      url: https://a.example/mcp\n      headers: {Authorization: \"${TOK}\"}\n      timeout: \"${TOK}\"\n", map[string]string{"TOK": "sekret-token-value"})
	if err == nil || strings.Contains(err.Error(), "sekret-token-value") {
		t.Fatalf("error = %v", err)
	}
}
