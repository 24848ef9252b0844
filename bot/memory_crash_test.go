package bot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/memory/bleveindex"
)

// TestMemoryCrashLosesNoIndexUpdate: the bot binary with memory on is
// killed (SIGKILL) while messages arrive and their entries are being
// indexed, several times; after the last stop, what the change queue
// still holds is applied, and then every message the channel displayed is
// found in the index: no change was marked done without reaching it.
func TestMemoryCrashLosesNoIndexUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("crash")
	ch, err := emu.AddTextChannel(g.ID, "c0")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("discord:\n  token: %q\n  apiURL: %q\nstore: {path: %q}\nhttp: {listen: \"\"}\nlog: {level: warn, format: json}\nmemory: {enabled: true}\n",
		emu.Token(), emu.URL(), storePath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	connected := func(n int) {
		t.Helper()
		if err := emu.Wait(ctx, func() bool { return emu.GatewayStats().Identifies >= n && len(emu.Commands("")) > 0 }); err != nil {
			t.Fatalf("bot did not connect (%d): %v\nlogs:\n%s", n, err, logs.String())
		}
	}
	var cmd *exec.Cmd
	sent := map[string]string{} // message id -> its token
	for round := range 4 {
		cmd = runBot(t, bin, cfgPath, &logs)
		connected(round + 1)
		for i := range 8 {
			tok := fmt.Sprintf("tok%dx%dz", round, i)
			m, err := emu.UserSay(ch.ID, alice.ID, fmt.Sprintf("<@%s> %s", emu.BotUserID(), tok))
			if err != nil {
				t.Fatal(err)
			}
			sent[m.ID] = tok
		}
		if round == 3 {
			break
		}
		// Kill once some replies are out: entries are being written and indexed.
		if err := emu.Wait(ctx, func() bool { return len(emu.Messages(ch.ID)) >= len(sent)+4*round+2 }); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
	if err := emu.Wait(ctx, func() bool { return len(emu.Messages(ch.ID)) >= 2*len(sent) }); err != nil {
		t.Fatalf("not every message was answered: %v\nlogs:\n%s", err, logs.String())
	}
	stopBot(t, cmd, &logs)

	st := openStopped(t, storePath)
	idx, err := bleveindex.Open(bleveindex.Dir(storePath))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	ix := memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: zerolog.Nop()})
	for {
		n, err := ix.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	key := seChannelKey(ch.ID)
	for id, tok := range sent {
		hits, err := idx.Search(ctx, memory.Query{Text: tok, Keys: []string{key}, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, h := range hits {
			found = found || h.Doc.MessageID == id
		}
		if !found {
			t.Errorf("message %s (%s) is displayed but not in the index: an update was lost", id, tok)
		}
	}
}
