package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestNoOrphanAfterBotKill (invariant 21) SIGKILLs the real bot binary
// while an MCP stdio server runs that has started a grandchild, restarts
// it, and finds neither the server nor the grandchild alive: the kernel
// kills the server with the bot (Pdeathsig), and the restarted bot kills
// what is left of the recorded process group. On the old code both ran on.
func TestNoOrphanAfterBotKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("orphans")
	if _, err := emu.AddTextChannel(g.ID, "general"); err != nil {
		t.Fatal(err)
	}
	llm := modeltest.NewOpenAIFake(t, "")
	pids := filepath.Join(dir, "pids")
	// A "server" that starts a grandchild and never answers the handshake
	// (its start timeout is long): it runs while the bot is killed.
	script := fmt.Sprintf("sleep 300 & echo $$ $! > %s; exec sleep 301", pids)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
models:
  default: {provider: openai, baseURL: %q, model: fake}
agents:
  - {id: main, name: Assistant, mcp: [slow]}
mcp:
  servers:
    slow: {command: sh, args: ["-c", %q], timeout: 5m}
store: {path: %q}
http: {listen: ""}
log: {level: debug, format: json}
`, emu.Token(), emu.URL(), llm.URL, script, filepath.Join(dir, "bot.db"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	alive := func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && !strings.Contains(string(b), ") Z ")
	}
	// Bounded waits on /proc (the test's failure bound, not a wait for luck).
	waitUntil := func(what string, cond func() bool) bool {
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	}
	var logs lockedBuffer
	cmd := runBot(t, bin, cfgPath, &logs)
	var server, grandchild int
	if !waitUntil("the server's pids", func() bool {
		b, _ := os.ReadFile(pids)
		_, err := fmt.Sscanf(string(b), "%d %d", &server, &grandchild)
		return err == nil
	}) {
		t.Fatalf("the MCP server did not start\nlogs:\n%s", logs.String())
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-server, syscall.SIGKILL)
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
	})
	// Killed once the group is recorded (the bot says so at debug level).
	if !waitUntil("the group's record", func() bool { return strings.Contains(logs.String(), "child process group recorded") }) {
		t.Fatalf("the server's group was not recorded\nlogs:\n%s", logs.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !waitUntil("the server to die with the bot", func() bool { return !alive(server) }) {
		t.Errorf("the MCP server %d outlived the killed bot (no parent-death signal)", server)
	}
	cmd = runBot(t, bin, cfgPath, &logs)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !waitUntil("the grandchild to be reaped", func() bool { return !alive(grandchild) }) {
		t.Fatalf("the server's child %d still runs after the restart\nlogs:\n%s", grandchild, logs.String())
	}
	// The kill comes first, its log line after it.
	if !waitUntil("the kill's log line", func() bool { return strings.Contains(logs.String(), "a previous run of the bot left running") }) {
		t.Errorf("the kill is not reported in a log line:\n%s", logs.String())
	}
}
