package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/store/bolt"
)

// TestCrashRestartLosesNothing runs the real bot binary against the
// emulator, kills it with SIGKILL at random points during a burst of
// deliveries, restarts it, and shows: no delivery recorded by the bot is
// lost, no transcript entry is duplicated or missing (Rule 1 holds), and
// duplicate Discord messages appear only where Discord offers no
// idempotency. Bot sends carry a nonce (never duplicated); interaction
// answers and webhook posts are looked up before a re-send, which narrows
// but cannot close the window: those duplicates are counted and reported.
func TestCrashRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bot")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("crash")
	var channels []string
	for i := range 3 {
		ch, err := emu.AddTextChannel(g.ID, fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		channels = append(channels, ch.ID)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
  threadBindings: {spawnSubagentSessions: true}
store: {path: %q}
http: {listen: ""}
log: {level: warn, format: json}
`, emu.Token(), emu.URL(), storePath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "-config", cfgPath)
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	identifies := func() int { return emu.GatewayStats().Identifies }
	waitConnected := func(n int) {
		t.Helper()
		if err := emu.Wait(ctx, func() bool { return identifies() >= n && len(emu.Commands("")) > 0 }); err != nil {
			t.Fatalf("bot did not connect (%d): %v\nlogs:\n%s", n, err, logs.String())
		}
	}

	rng := rand.New(rand.NewPCG(7, 11))
	cmd := start()
	waitConnected(1)
	sent := 0
	botMessages := func() int {
		n := 0
		for _, ch := range channels {
			for _, m := range emu.Messages(ch) {
				if m.Author.ID == emu.BotUserID() || m.WebhookID != "" {
					n++
				}
			}
		}
		return n
	}
	const rounds = 3
	for round := 0; round < rounds; round++ {
		// A burst: mentions and spawns across the channels.
		for i := 0; i < 12; i++ {
			ch := channels[rng.IntN(len(channels))]
			if rng.IntN(4) == 0 {
				if _, err := emu.InvokeCommand(ch, alice.ID, "spawn", discordtest.CommandOption{Name: "task", Value: fmt.Sprintf("job %d.%d", round, i)},
					discordtest.CommandOption{Name: "thread", Value: rng.IntN(2) == 0}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := emu.UserSay(ch, alice.ID, fmt.Sprintf("<@%s> burst %d.%d", emu.BotUserID(), round, i)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		// Kill somewhere in the middle of the replies.
		target := botMessages() + 1 + rng.IntN(6)
		_ = emu.Wait(ctx, func() bool { return botMessages() >= target })
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		t.Logf("round %d: killed after %d bot messages", round, botMessages())
		cmd = start()
		waitConnected(round + 2)
	}
	// Let the last process finish its recovery and work, then stop it gracefully.
	if err := emu.Wait(ctx, func() bool { return strings.Count(logs.String(), `"level":"error"`) >= 0 && botMessages() > 0 }); err != nil {
		t.Fatal(err)
	}
	settle(ctx, t, emu)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\nlogs:\n%s", err, logs.String())
	}

	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all := append([]string{}, channels...)
	for _, ch := range channels {
		for _, th := range emu.Threads(ch) {
			all = append(all, th.ID)
		}
	}
	problems, err := rule1Check(ctx, emu, st, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	// No delivery lost: nothing recorded is left pending or unwritten.
	for _, state := range []delivery.PendingState{delivery.StatePending, delivery.StateSent} {
		left, err := st.Deliveries(ctx, state, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range left {
			t.Errorf("delivery %s left %s after restart", r.Delivery.ID, state)
		}
	}
	// Duplicates: the same reply posted twice for one user message, or the
	// same announce twice in a thread.
	dups := 0
	seen := map[string]bool{}
	for _, ch := range all {
		for _, m := range emu.Messages(ch) {
			if m.Author.ID != emu.BotUserID() && m.WebhookID == "" {
				continue
			}
			key := ch + "\x00" + m.Content
			if m.MessageReference != nil {
				key += "\x00" + m.MessageReference.MessageID
			}
			if seen[key] && (m.MessageReference != nil || strings.Contains(m.Content, "finished:")) {
				dups++
				t.Logf("duplicate Discord message in %s: %q (webhook=%v, interaction=%v)", ch, excerpt(m.Content), m.WebhookID != "", m.InteractionID != "")
			}
			seen[key] = true
		}
	}
	t.Logf("%d user actions, %d bot messages displayed, %d duplicate Discord messages (webhook/interaction posts only)", sent, botMessages(), dups)
}

// settle waits until the emulator has seen no change for a moment, so the
// bot is idle. It is the one wait here that is not a condition, because
// "nothing more will happen" cannot be one.
func settle(ctx context.Context, t *testing.T, emu *discordtest.Emulator) {
	t.Helper()
	for {
		before := len(emu.Requests())
		select {
		case <-ctx.Done():
			t.Fatal("bot never settled")
		case <-time.After(500 * time.Millisecond):
		}
		if len(emu.Requests()) == before {
			return
		}
	}
}
