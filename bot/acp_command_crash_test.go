package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestNoOrphanCommandAfterBotKill (invariant 21) SIGKILLs the real bot
// binary while a command an ACP agent runs has a child (sleep 1000),
// restarts it, and finds no such process in /proc: the command's process
// group was recorded and the restarted bot kills what is left of it; the
// thread says the command was cut off. sandbox: none, the case the
// sandbox's PID namespace does not cover.
func TestNoOrphanCommandAfterBotKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	agent := acptest.Build(t)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("orphans")
	ch, err := emu.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	llm := modeltest.NewOpenAIFake(t, "")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
  threadBindings: {enabled: true}
models:
  default: {provider: openai, baseURL: %q, model: fake}
acp:
  agents:
    script:
      command: %q
      workspace: %q
      users: [%q]
      terminal: true
      sandbox: none
      approve: agent
store: {path: %q}
http: {listen: ""}
log: {level: debug, format: json}
`, emu.Token(), emu.URL(), llm.URL, agent, filepath.Join(dir, "acp"), alice.ID, filepath.Join(dir, "bot.db"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	alive := func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && !strings.Contains(string(b), ") Z ")
	}
	// Bounded waits on /proc (the test's failure bound, not a wait for luck).
	waitProc := func(cond func() bool) bool {
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var logs lockedBuffer
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := emu.Wait(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, err, logs.String())
		}
	}
	var thread string
	shown := func(re *regexp.Regexp) []string {
		for _, m := range emu.Messages(thread) {
			if m.Author.ID == emu.BotUserID() {
				if sm := re.FindStringSubmatch(m.Content); sm != nil {
					return sm
				}
			}
		}
		return nil
	}

	cmd := runBot(t, bin, cfgPath, &logs)
	wait("the bot to connect", func() bool { return emu.GatewayStats().Identifies >= 1 && len(emu.Commands("")) > 0 })
	in, err := emu.InvokeCommand(ch.ID, alice.ID, "spawn", discordtest.CommandOption{Name: "agent", Value: "script"},
		discordtest.CommandOption{Name: "task", Value: "run sleep 1000 & echo child=$!; wait"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emu.WaitResponses(ctx, in.ID, 1); err != nil {
		t.Fatalf("/spawn not answered: %v", err)
	}
	wait("the thread", func() bool { return len(emu.Threads(ch.ID)) == 1 })
	thread = emu.Threads(ch.ID)[0].ID
	childRE := regexp.MustCompile(`child=(\d+)`)
	wait("the command's child", func() bool { return shown(childRE) != nil })
	child, _ := strconv.Atoi(shown(childRE)[1])
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if !alive(child) {
		t.Fatalf("the command's child %d is not running", child)
	}
	if !waitProc(func() bool { return strings.Contains(logs.String(), `"kind":"command"`) }) {
		t.Fatalf("the command's group was not recorded\nlogs:\n%s", logs.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ids := emu.GatewayStats().Identifies
	cmd = runBot(t, bin, cfgPath, &logs)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !waitProc(func() bool { return !alive(child) }) {
		t.Fatalf("the command's child %d still runs after the restart\nlogs:\n%s", child, logs.String())
	}
	wait("the bot to reconnect", func() bool { return emu.GatewayStats().Identifies > ids })
	wait("the cut-off notice", func() bool {
		return shown(regexp.MustCompile(`any command it was running was cut off`)) != nil
	})
	if !strings.Contains(logs.String(), "a previous run of the bot left running") {
		t.Errorf("the kill is not reported in a log line")
	}
}
