package bot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestCrashMidStream kills the real bot binary (SIGKILL) while a reply is
// streaming (displayed and edited, its entry not yet written), restarts it,
// and shows: the restarted bot finishes that message (its recorded text
// with the interrupted mark, no Stop button) instead of posting another,
// the turn is not answered twice, and transcript == display (Rule 1).
func TestCrashMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("crash")
	ch, err := emu.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	llm := modeltest.NewOpenAIFake(t, "")
	var chunks []string
	for i := range 60 {
		chunks = append(chunks, fmt.Sprintf("word%d ", i))
	}
	llm.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Chunks: chunks, ChunkDelay: 100 * time.Millisecond}
	})
	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
models:
  default: {provider: openai, baseURL: %q, model: fake, stream: true}
store: {path: %q}
http: {listen: ""}
log: {level: warn, format: json}
`, emu.Token(), emu.URL(), llm.URL, storePath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	start := func() *exec.Cmd { return runBot(t, bin, cfgPath, &logs) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := emu.Wait(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, err, logs.String())
		}
	}
	bot := func() []discordtest.Message {
		var out []discordtest.Message
		for _, m := range emu.Messages(ch.ID) {
			if m.Author.ID == emu.BotUserID() {
				out = append(out, m)
			}
		}
		return out
	}
	cmd := start()
	wait("the bot to connect", func() bool { return emu.GatewayStats().Identifies >= 1 && len(emu.Commands("")) > 0 })
	if _, err := emu.UserSay(ch.ID, alice.ID, "<@"+emu.BotUserID()+"> stream a long answer"); err != nil {
		t.Fatal(err)
	}
	// Killed after the reply was posted and edited at least twice, mid-stream.
	wait("the streamed reply to be edited", func() bool {
		m := bot()
		return len(m) == 1 && len(m[0].History) >= 2 && len(m[0].Buttons()) == 1
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	shown := bot()[0]
	if strings.HasSuffix(shown.Content, "word59 ") {
		t.Fatal("the stream ended before the kill")
	}

	before := emu.GatewayStats().Identifies
	cmd = start()
	wait("the bot to reconnect", func() bool { return emu.GatewayStats().Identifies > before })
	wait("the interrupted reply finished", func() bool {
		m := bot()
		return len(m) >= 1 && strings.HasSuffix(m[0].Content, delivery.InterruptedMark) && len(m[0].Buttons()) == 0
	})
	stopBot(t, cmd, &logs)
	msgs := bot()
	if len(msgs) != 1 {
		var texts []string
		for _, m := range msgs {
			texts = append(texts, m.Content)
		}
		t.Fatalf("%d bot messages after the restart, want the one finished: %q", len(msgs), texts)
	}
	if want := shown.Content + delivery.InterruptedMark; msgs[0].Content != want && !strings.HasPrefix(msgs[0].Content, shown.Content) {
		t.Fatalf("finished reply %q does not keep what was shown %q", msgs[0].Content, shown.Content)
	}
	st := openStopped(t, storePath)
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, []string{ch.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("rule 1: %s", p)
	}
}
