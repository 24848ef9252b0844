package bot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/scheduler"
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
	bin := buildBot(t, dir)
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
	// A model that takes its time, so kills land during model calls too
	// (turns, subagent runs and job runs).
	llm := modeltest.NewOpenAIFake(t, "")
	var calls atomic.Int64
	llm.Respond(func(b modeltest.Body) modeltest.Reply {
		n := calls.Add(1)
		return modeltest.Reply{Text: fmt.Sprintf("answer %d", n), Delay: time.Duration(50+n%5*50) * time.Millisecond}
	})
	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
  operators: {users: [%q]}
  threadBindings: {spawnSubagentSessions: true}
models:
  default: {provider: openai, baseURL: %q, model: fake}
store: {path: %q}
http: {listen: ""}
log: {level: warn, format: json}
`, emu.Token(), emu.URL(), alice.ID, llm.URL, storePath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer // the child writes it while the test reads it
	start := func() *exec.Cmd { return runBot(t, bin, cfgPath, &logs) }
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
	var mentions []discordtest.Message // user messages that must get a reply
	var spawns []string                // interaction ids of /spawn
	jobIn := func(ch string, opts ...discordtest.CommandOption) {
		in, err := emu.InvokeCommand(ch, alice.ID, "cron", discordtest.CommandOption{Name: "add", Value: opts})
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		got, err := emu.WaitResponses(wctx, in.ID, 1)
		if err != nil {
			t.Fatalf("/cron add got no answer: %v", err)
		}
		id, ok := backquoted(got.Responses[0].Content)
		if !ok {
			t.Fatalf("/cron add answered %q", got.Responses[0].Content)
		}
		if _, err := emu.InvokeCommand(ch, alice.ID, "cron", discordtest.CommandOption{Name: "run", Value: []discordtest.CommandOption{{Name: "id", Value: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 3
	for round := 0; round < rounds; round++ {
		// A burst: mentions, spawns and job runs across the channels.
		for i := 0; i < 12; i++ {
			ch := channels[rng.IntN(len(channels))]
			switch r := rng.IntN(10); {
			case r < 2:
				in, err := emu.InvokeCommand(ch, alice.ID, "spawn", discordtest.CommandOption{Name: "task", Value: fmt.Sprintf("job %d.%d", round, i)},
					discordtest.CommandOption{Name: "thread", Value: rng.IntN(2) == 0})
				if err != nil {
					t.Fatal(err)
				}
				spawns = append(spawns, in.ID)
			case r == 2:
				jobIn(ch, discordtest.CommandOption{Name: "schedule", Value: "every 1h"}, discordtest.CommandOption{Name: "prompt", Value: fmt.Sprintf("report %d.%d", round, i)},
					discordtest.CommandOption{Name: "target", Value: "main"})
			case r == 3:
				jobIn(ch, discordtest.CommandOption{Name: "schedule", Value: "every 1h"}, discordtest.CommandOption{Name: "prompt", Value: fmt.Sprintf("digest %d.%d", round, i)},
					discordtest.CommandOption{Name: "target", Value: "isolated"}, discordtest.CommandOption{Name: "to", Value: "channel:" + channels[rng.IntN(len(channels))]})
			default:
				m, err := emu.UserSay(ch, alice.ID, fmt.Sprintf("<@%s> burst %d.%d", emu.BotUserID(), round, i))
				if err != nil {
					t.Fatal(err)
				}
				mentions = append(mentions, m)
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
	// The last process finishes what was owed: every mention gets its reply
	// and every subagent that started announces (or leaves its notice).
	replied := func(m discordtest.Message) bool {
		for _, r := range emu.Messages(m.ChannelID) {
			if r.MessageReference != nil && r.MessageReference.MessageID == m.ID && (r.Author.ID == emu.BotUserID() || r.WebhookID != "") {
				return true
			}
		}
		return false
	}
	everywhere := func() []discordtest.Message {
		var out []discordtest.Message
		for _, ch := range channels {
			out = append(out, emu.Messages(ch)...)
			for _, th := range emu.Threads(ch) {
				out = append(out, emu.Messages(th.ID)...)
			}
		}
		return out
	}
	if err := emu.Wait(ctx, func() bool {
		for _, m := range mentions {
			if !replied(m) {
				return false
			}
		}
		all := everywhere()
		for _, id := range spawns {
			in, _ := emu.Interaction(id)
			for _, r := range in.Responses {
				label, ok := strings.CutPrefix(r.Content, "Started subagent **")
				if !ok {
					continue
				}
				label, _, _ = strings.Cut(label, "**")
				ended := 0
				for _, end := range []string{" finished", "** finished", " failed", " timed out"} {
					ended += countContaining(all, label+end)
				}
				if ended == 0 {
					return false
				}
			}
		}
		return true
	}); err != nil {
		t.Fatalf("owed work never finished: %v\nlogs:\n%s", err, logs.String())
	}
	settle(ctx, t, emu)
	stopBot(t, cmd, &logs)
	st := openStopped(t, storePath)
	all := append([]string{}, channels...)
	for _, ch := range channels {
		for _, th := range emu.Threads(ch) {
			all = append(all, th.ID)
		}
	}
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, all, nil)
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
				if m.WebhookID == "" && m.InteractionID == "" {
					t.Errorf("duplicate bot message in %s: %q (bot sends carry a nonce)", ch, rule1.Excerpt(m.Content))
				} else {
					dups++
					t.Logf("duplicate Discord message in %s: %q (webhook=%v, interaction=%v)", ch, rule1.Excerpt(m.Content), m.WebhookID != "", m.InteractionID != "")
				}
			}
			seen[key] = true
		}
	}
	t.Logf("%d user actions, %d bot messages displayed, %d duplicate webhook/interaction posts", sent, botMessages(), dups)
	// Invariant 16: nothing is left running after the restart.
	infos, err := st.SessionInfos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Status == session.StatusRunning {
			t.Errorf("subagent %s left running", in.Key)
		}
		if len(in.Pending) > 0 {
			t.Errorf("session %s still owes %d turns", in.Key, len(in.Pending))
		}
	}
	jobs, err := st.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		runs, err := st.Runs(ctx, j.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Status == scheduler.StatusRunning {
				t.Errorf("job %s run %s left running", j.ID, r.RunID)
			}
		}
	}
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

// backquoted returns the first `...` span of a command answer (a job id).
func backquoted(text string) (string, bool) {
	_, rest, ok := strings.Cut(text, "`")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "`")
	return id, ok && id != ""
}
