package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// Power has a scope (invariant 13, issue 26), end to end against the
// emulator: guild A is authzStart's world (alice an operator by Manage
// Server, bob and carol members); guild B is a server a stranger made and
// added the bot to (the default config: no operators configured), and its
// owner holds Manage Server in B only. From B, B's owner reaches nothing
// of A's: not carol's DM, not A's jobs, not A's runs; A's owner still
// manages A. Fails on the old code, where Manage Server in any guild made
// an operator of everything.
func TestScopeE2EOwnerOfAnotherGuildReachesNothingOfA(t *testing.T) {
	t.Parallel()
	var guildB discordtest.Guild
	var chanB discordtest.Channel
	w := authzStart(t, func(w *authzWorld) {
		guildB = w.emu.AddGuild("b")
		var err error
		if chanB, err = w.emu.AddTextChannel(guildB.ID, "b-general"); err != nil {
			t.Fatal(err)
		}
	})
	ownerB := guildB.OwnerID

	// carol's DM has a session; A's #secret has a job.
	w.replyTo(t, mustDM(t, w.emu, w.carol.ID, "hello bot"))
	w.command(t, w.secret.ID, w.alice.ID, "cron", sub("add", opt("schedule", "every 1h"), opt("prompt", "secret digest")))
	jobs, err := w.app.sched.Scheduler.List(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	id := jobs[0].ID

	// B's owner is an operator of B: their own /cron list works there.
	if got := w.command(t, chanB.ID, ownerB, "cron", sub("list")); strings.Contains(got.Content, "secret digest") || strings.Contains(got.Content, id) {
		t.Errorf("/cron list in B showed A's job: %q", got.Content)
	}
	for _, c := range []struct {
		name string
		sub  string
	}{{"/cron remove", "remove"}, {"/cron run", "run"}, {"/cron runs", "runs"}} {
		if got := w.command(t, chanB.ID, ownerB, "cron", sub(c.sub, opt("id", id))); !strings.Contains(got.Content, "no job "+id+" you can see") {
			t.Errorf("%s of A's job by B's owner = %q", c.name, got.Content)
		}
	}
	carolDM := "agent:main:discord:dm:" + w.carol.ID
	th, err := w.emu.AddThread(chanB.ID, "b's", ownerB)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.command(t, th.ID, ownerB, "focus", opt("target", carolDM)); !strings.Contains(got.Content, "may not focus "+carolDM) {
		t.Errorf("/focus onto carol's DM by B's owner = %q", got.Content)
	}
	if recs := w.app.bindings.ListBySession(carolDM); len(recs) != 0 {
		t.Fatalf("carol's DM session got bound: %+v", recs)
	}
	// The model's job tools, asked by B's owner, refuse as /cron does.
	r := w.replyTo(t, w.say(t, chanB.ID, ownerB, fmt.Sprintf("drop it\n!tool cancel_job {\"id\":%q}", id)))
	if !strings.Contains(r.Content, "cancel_job: refused: there is no job "+id+" you can see") {
		t.Errorf("cancel_job by B's owner = %q", r.Content)
	}
	r = w.replyTo(t, w.say(t, chanB.ID, ownerB, "what runs?\n!tool list_jobs {}"))
	if strings.Contains(r.Content, "secret digest") || strings.Contains(r.Content, id) {
		t.Errorf("list_jobs showed B's owner A's job: %q", r.Content)
	}
	r = w.replyTo(t, w.say(t, chanB.ID, ownerB, fmt.Sprintf("post there\n!tool schedule_job {\"schedule\":\"every 10m\",\"prompt\":\"spam\",\"to\":\"channel:%s\"}", w.general.ID)))
	if !strings.Contains(r.Content, "schedule_job: refused") {
		t.Errorf("schedule_job into A by B's owner = %q", r.Content)
	}
	// A's owner (an operator of A, acting in A) still manages A's job;
	// carol's DM is not theirs either.
	ath, err := w.emu.AddThread(w.general.ID, "alice's", w.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.command(t, ath.ID, w.alice.ID, "focus", opt("target", carolDM)); !strings.Contains(got.Content, "may not focus "+carolDM) {
		t.Errorf("/focus onto carol's DM by A's owner = %q", got.Content)
	}
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("list")); !strings.Contains(got.Content, id) {
		t.Errorf("/cron list by A's owner = %q", got.Content)
	}
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("remove", opt("id", id))); !strings.Contains(got.Content, "removed") {
		t.Errorf("/cron remove by A's owner = %q", got.Content)
	}
	finishBot(t, w.harness, w.general.ID, w.secret.ID, chanB.ID, th.ID, ath.ID)
}

// A guild outside discord.guilds does not exist for the bot. A first run
// without the list registered the commands globally; after a restart with
// the list, the global registration is gone (the commands exist only in
// the served guild, so none can be run from another), and a message from
// the other guild gets no answer while the served guild is answered. Fails
// on the old code, which left the global registration in place, so every
// guild could still run the commands.
func TestScopeE2EUnservedGuildGetsNoAnswer(t *testing.T) {
	t.Parallel()
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Provider: newSEModel(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	guildB := h.emu.AddGuild("b")
	chanB, err := h.emu.AddTextChannel(guildB.ID, "b-general")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(h.emu.Commands("")) == 0 {
		t.Fatal("the first run (no guild list) registered no global commands")
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.cfg.Discord.Guilds = []string{h.guild.ID}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the global registration removed", func() bool { return len(h.emu.Commands("")) == 0 })
	if len(h.emu.Commands(h.guild.ID)) == 0 {
		t.Fatal("no commands registered in the served guild")
	}
	if _, err := h.emu.InvokeCommand(chanB.ID, guildB.OwnerID, "agents"); err == nil {
		t.Error("a command could be run from an unserved guild")
	}
	if _, err := h.emu.UserSay(chanB.ID, guildB.OwnerID, fmt.Sprintf("<@%s> hello", h.emu.BotUserID())); err != nil {
		t.Fatal(err)
	}
	// The served guild is answered (so the bot is up and handling events).
	ok, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "agents")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := h.emu.WaitResponses(ctx, ok.ID, 1); err != nil {
		t.Fatalf("served guild's command: %v", err)
	}
	finishBot(t, h, h.general.ID)
	for _, m := range h.emu.Messages(chanB.ID) {
		if m.Author.ID == h.emu.BotUserID() {
			t.Errorf("the bot posted in an unserved guild: %q", m.Content)
		}
	}
}

func mustDM(t *testing.T, e *discordtest.Emulator, userID, text string) discordtest.Message {
	t.Helper()
	m, err := e.UserDM(userID, text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
