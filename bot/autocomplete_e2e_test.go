package bot

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// complete types typed into option of /name (in sub, when given) as user
// in channel and returns the values the bot suggested: its answer is the
// one type 8 callback the emulator accepts only within Discord's 3 s.
func (w *authzWorld) complete(t *testing.T, channel, user, name, subName, option, typed string) []string {
	t.Helper()
	focusedOpt := discordtest.CommandOption{Name: option, Value: typed, Focused: true}
	opts := []discordtest.CommandOption{focusedOpt}
	if subName != "" {
		opts = []discordtest.CommandOption{sub(subName, focusedOpt)}
	}
	in, err := w.emu.InvokeAutocomplete(channel, user, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	in, err = w.emu.WaitResponses(ctx, in.ID, 1)
	if err != nil {
		t.Fatalf("no answer to autocomplete of /%s %s: %v", name, option, err)
	}
	if r := in.Responses[0]; r.Kind != "callback" || r.Type != 8 {
		t.Fatalf("autocomplete answered with %+v, want a type 8 callback", r)
	}
	var out []string
	for _, c := range in.Responses[0].Choices {
		v, _ := c.Value.(string)
		out = append(out, v)
	}
	return out
}

// TestAutocompleteE2ETwoGuilds (issue 32 item 2): the options naming a
// job, a run, a label or an agent complete themselves within Discord's
// 3 s, each list filtered by the command's own authority: guild B's owner
// is offered none of guild A's jobs or sessions and not carol's DM; A's
// operator is offered A's job but not carol's DM either; carol is offered
// her own DM's session; a member is offered only the runs they may stop.
func TestAutocompleteE2ETwoGuilds(t *testing.T) {
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
	dm := mustDM(t, w.emu, w.carol.ID, "hello bot")
	w.replyTo(t, dm)
	carolDM := "agent:main:discord:dm:" + w.carol.ID
	w.command(t, w.secret.ID, w.alice.ID, "cron", sub("add", opt("schedule", "every 1h"), opt("prompt", "secret digest")))
	jobs, err := w.app.sched.Scheduler.List(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	id := jobs[0].ID
	// A session in B, so that B's owner has something to be offered.
	w.replyTo(t, w.say(t, chanB.ID, ownerB, "hi from b"))
	sessionB := "agent:main:discord:channel:" + chanB.ID

	for _, s := range []string{"remove", "run", "runs"} {
		if got := w.complete(t, chanB.ID, ownerB, "cron", s, "id", ""); len(got) != 0 {
			t.Errorf("/cron %s id offered B's owner %q (A's job is %s)", s, got, id)
		}
		if got := w.complete(t, w.general.ID, w.alice.ID, "cron", s, "id", "sec"); !slices.Equal(got, []string{id}) {
			t.Errorf("/cron %s id offered A's operator %q, want %s", s, got, id)
		}
	}
	if got := w.complete(t, w.general.ID, w.bob.ID, "cron", "remove", "id", ""); len(got) != 0 {
		t.Errorf("/cron remove id offered a member %q", got)
	}
	got := w.complete(t, chanB.ID, ownerB, "focus", "", "target", "")
	if slices.Contains(got, carolDM) || !slices.Contains(got, sessionB) {
		t.Errorf("/focus target offered B's owner %q: want B's session, never carol's DM", got)
	}
	for _, k := range got {
		if k != sessionB {
			t.Errorf("/focus target offered B's owner %s, which is not B's", k)
		}
	}
	if got := w.complete(t, w.general.ID, w.alice.ID, "focus", "", "target", ""); slices.Contains(got, carolDM) {
		t.Errorf("/focus target offered A's operator carol's DM: %q", got)
	}
	if got := w.complete(t, dm.ChannelID, w.carol.ID, "focus", "", "target", "dm"); !slices.Contains(got, carolDM) {
		t.Errorf("/focus target in carol's DM offered her %q, want her own DM's session", got)
	}
	if got := w.complete(t, w.general.ID, w.bob.ID, "spawn", "", "agent", ""); !slices.Equal(got, []string{"main"}) {
		t.Errorf("/spawn agent offered %q, want the configured agent", got)
	}
	if got := w.complete(t, w.general.ID, w.bob.ID, "session", "idle", "duration", "24"); len(got) == 0 || got[0] != "24" {
		t.Errorf("/session idle duration offered %q", got)
	}
	if got := w.complete(t, w.general.ID, w.bob.ID, "stop", "", "target", ""); len(got) != 0 {
		t.Errorf("/stop target offered %q with nothing running", got)
	}
	finishBot(t, w.harness, w.general.ID, w.secret.ID, chanB.ID, dm.ChannelID)
}
