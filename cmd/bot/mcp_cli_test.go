package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/internal/npmtest"
)

func mcpCLIConfig(t *testing.T) string {
	t.Helper()
	files := npmtest.Bin(t, "mcp-server-filesystem")
	extra := fmt.Sprintf(`agents:
  - id: main
    mcp: [files]
  - id: plain
mcp:
  servers:
    files:
      command: %q
      args: [%q]
    broken:
      command: %q
      env: {API_KEY: "doctor-env-secret-1"}
      timeout: 2s
`, files, t.TempDir(), filepath.Join(t.TempDir(), "missing-server"))
	cfg, _ := cliConfig(t, extra)
	return cfg
}

// bot doctor starts each server once, lists its tools, and reports one
// that does not start (exit 1); no env value is printed.
func TestCLIDoctorListsMCPTools(t *testing.T) {
	t.Parallel()
	cfg := mcpCLIConfig(t)
	code, out, errOut := cliRun(t, "doctor", "-config", cfg)
	if code != 1 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✔ mcp server files: ", "files__read_text_file", "files__list_directory", "✘ mcp server broken did not start: ", "⚠ no agent uses it", "1 problem(s) remain"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "doctor-env-secret-1") {
		t.Errorf("an env value was printed:\n%s", out)
	}
}

// bot inspect tools lists an agent's tools: the bot's own and its MCP
// servers', with who may use them.
func TestCLIInspectTools(t *testing.T) {
	t.Parallel()
	cfg := mcpCLIConfig(t)
	code, out, errOut := cliRun(t, "inspect", "tools", "main", "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("inspect tools: exit %d\n%s%s", code, out, errOut)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ Name, Source, Who string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		names = append(names, r.Source+":"+r.Name)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"bot:send_message", "mcp:files:files__read_text_file"} {
		if !strings.Contains(got, want) {
			t.Errorf("tools %s lack %s", got, want)
		}
	}
	code, out, _ = cliRun(t, "inspect", "tools", "plain", "-config", cfg)
	if code != 0 || strings.Contains(out, "files__") {
		t.Errorf("agent plain (no mcp): exit %d\n%s", code, out)
	}
	if code, _, errOut := cliRun(t, "inspect", "tools", "nobody", "-config", cfg); code != 1 || !strings.Contains(errOut, `unknown agent "nobody"`) {
		t.Errorf("unknown agent: exit %d, %q", code, errOut)
	}
}
