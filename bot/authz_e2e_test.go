package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
)

// Who may do what (invariant 13, discord.access), end to end: the real
// bot against the emulator, which computes Discord's permissions from
// roles and overwrites. The world is a guild set up as Discord sets up a
// new one (@everyone may view and send, nothing more), with:
//   - alice: holds a "mods" role with Manage Server (an operator, since no
//     operators are configured), and a member overwrite on #secret;
//   - bob, carol: plain members;
//   - #secret: @everyone may not view it (the bot has a member overwrite);
//   - #readonly: @everyone may not send messages;
//   - #botmute: the bot may not send messages.
type authzWorld struct {
	*harness
	fake                      *clock.Fake
	model                     *seModel
	bob, carol                discordtest.User
	secret, readonly, botmute discordtest.Channel
	mods                      discordtest.Role
}

func authzStart(t *testing.T, configure func(w *authzWorld)) *authzWorld {
	t.Helper()
	fake := clock.NewFake(schedT0)
	m := newSEModel(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Clock: fake, Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	w := &authzWorld{harness: h, fake: fake, model: m}
	e, g := h.emu, h.guild.ID
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SetRolePermissions(g, g, discordtest.DefaultEveryone))
	w.mods, err = e.AddRole(g, "mods", discordgo.PermissionManageGuild)
	must(err)
	must(e.GrantRole(g, h.alice.ID, w.mods.ID))
	w.bob, err = e.AddMember(g, "bob")
	must(err)
	w.carol, err = e.AddMember(g, "carol")
	must(err)
	w.secret, err = e.AddTextChannel(g, "secret")
	must(err)
	must(e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: g, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionViewChannel}))
	must(e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: h.alice.ID, Type: discordtest.OverwriteMember, Allow: discordgo.PermissionViewChannel}))
	must(e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: e.BotUserID(), Type: discordtest.OverwriteMember, Allow: discordgo.PermissionViewChannel}))
	w.readonly, err = e.AddTextChannel(g, "readonly")
	must(err)
	must(e.SetOverwrite(w.readonly.ID, discordtest.Overwrite{ID: g, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionSendMessages}))
	w.botmute, err = e.AddTextChannel(g, "botmute")
	must(err)
	must(e.DenyBot(w.botmute.ID, discordgo.PermissionSendMessages))
	if configure != nil {
		configure(w)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *authzWorld) conv(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

// say posts a message addressed to the bot.
func (w *authzWorld) say(t *testing.T, channel, user, text string) discordtest.Message {
	t.Helper()
	m, err := w.emu.UserSay(channel, user, fmt.Sprintf("<@%s> %s", w.emu.BotUserID(), text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// replyTo waits for the bot's reply to a message and returns it.
func (w *authzWorld) replyTo(t *testing.T, m discordtest.Message) discordtest.Message {
	t.Helper()
	var out discordtest.Message
	waitUntil(t, w.harness, "the reply to "+m.ID, func() bool {
		for _, x := range w.emu.Messages(m.ChannelID) {
			if x.Author.ID == w.emu.BotUserID() && x.MessageReference != nil && x.MessageReference.MessageID == m.ID {
				out = x
				return true
			}
		}
		return false
	})
	return out
}

// command runs a slash command and returns its first response.
func (w *authzWorld) command(t *testing.T, channel, user, name string, opts ...discordtest.CommandOption) discordtest.InteractionResponse {
	t.Helper()
	in, err := w.emu.InvokeCommand(channel, user, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	in, err = w.emu.WaitResponses(ctx, in.ID, 1)
	if err != nil {
		t.Fatalf("no answer to /%s: %v", name, err)
	}
	if len(in.Responses) > 1 && in.Responses[0].Type == 5 { // deferred, then edited
		return in.Responses[len(in.Responses)-1]
	}
	return in.Responses[0]
}

func sub(name string, opts ...discordtest.CommandOption) discordtest.CommandOption {
	return discordtest.CommandOption{Name: name, Value: opts}
}

// A member cannot have the model cancel, list or create what /cron would
// refuse them: cancel_job and schedule_job are operator-only like /cron
// remove|add, and list_jobs (like /cron list) shows only jobs of
// conversations the asker can view. Fails on the old code, where the job
// tools ignored the asker.
func TestAuthzE2EMemberCannotCancelListOrCreateJobs(t *testing.T) {
	t.Parallel()
	w := authzStart(t, nil)
	added := w.command(t, w.secret.ID, w.alice.ID, "cron", sub("add", opt("schedule", "every 1h"), opt("prompt", "secret digest")))
	jobs, err := w.app.sched.Scheduler.List(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("after /cron add (%q): jobs %+v, %v", added.Content, jobs, err)
	}
	id := jobs[0].ID

	r := w.replyTo(t, w.say(t, w.general.ID, w.bob.ID, "what is scheduled?\n!tool list_jobs {}"))
	if strings.Contains(r.Content, "secret digest") || strings.Contains(r.Content, id) {
		t.Errorf("list_jobs showed bob a job of #secret: %q", r.Content)
	}
	r = w.replyTo(t, w.say(t, w.general.ID, w.bob.ID, fmt.Sprintf("stop it\n!tool cancel_job {\"id\":%q}", id)))
	if !strings.Contains(r.Content, "cancel_job: refused: there is no job "+id+" you can see") {
		t.Errorf("cancel_job reply = %q", r.Content)
	}
	r = w.replyTo(t, w.say(t, w.general.ID, w.bob.ID, "remind me\n!tool schedule_job {\"schedule\":\"every 10m\",\"prompt\":\"bob's spam\"}"))
	if !strings.Contains(r.Content, "schedule_job: refused: only operators of that conversation's server can schedule jobs") {
		t.Errorf("schedule_job reply = %q", r.Content)
	}
	jobs, err = w.app.sched.Scheduler.List(t.Context())
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("jobs after bob's tools = %+v, %v; want only %s", jobs, err, id)
	}
	// The commands apply the same rule.
	if got := w.command(t, w.general.ID, w.bob.ID, "cron", sub("list")); strings.Contains(got.Content, "secret digest") {
		t.Errorf("/cron list showed bob a job of #secret: %q", got.Content)
	}
	if got := w.command(t, w.general.ID, w.bob.ID, "cron", sub("runs", opt("id", id))); !strings.Contains(got.Content, "no job "+id+" you can see") {
		t.Errorf("/cron runs for bob = %q", got.Content)
	}
	if got := w.command(t, w.general.ID, w.bob.ID, "cron", sub("remove", opt("id", id))); !strings.Contains(got.Content, "There is no job "+id+" you can see") {
		t.Errorf("/cron remove for bob = %q", got.Content)
	}
	// The operator sees it, and may cancel it through the tool.
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("list")); !strings.Contains(got.Content, "secret digest") {
		t.Errorf("/cron list for the operator = %q", got.Content)
	}
	r = w.replyTo(t, w.say(t, w.general.ID, w.alice.ID, fmt.Sprintf("stop it\n!tool cancel_job {\"id\":%q}", id)))
	if !strings.Contains(r.Content, "removed") {
		t.Errorf("operator's cancel_job reply = %q", r.Content)
	}
	finishBot(t, w.harness, w.general.ID, w.secret.ID)
}

// send_message posts only where the user whose message started the turn
// can view and send messages, and the bot can post: every refusal is a
// tool result saying why, and nothing reaches the channel. Fails on the
// old code, which posted anywhere the bot could.
func TestAuthzE2ESendMessageOnlyWhereRequesterCanPost(t *testing.T) {
	t.Parallel()
	w := authzStart(t, nil)
	cases := []struct {
		to, want string
	}{
		{"channel:" + w.secret.ID, "send_message: refused: the requesting user cannot view #secret"},
		{"channel:" + w.readonly.ID, "send_message: refused: the requesting user may not send messages in #readonly"},
		{"channel:" + w.botmute.ID, "send_message: refused: the bot itself may not send messages in #botmute"},
		{"user:" + w.carol.ID, "send_message: refused: user:" + w.carol.ID + " is someone else's direct messages"},
	}
	for _, c := range cases {
		r := w.replyTo(t, w.say(t, w.general.ID, w.bob.ID, fmt.Sprintf("relay\n!tool send_message {\"to\":%q,\"text\":\"leak\"}", c.to)))
		if !strings.Contains(r.Content, c.want) {
			t.Errorf("to %s: reply %q, want %q", c.to, r.Content, c.want)
		}
	}
	for _, ch := range []string{w.secret.ID, w.readonly.ID, w.botmute.ID} {
		if n := countContaining(w.emu.Messages(ch), "leak"); n != 0 {
			t.Errorf("%d leaked messages in %s", n, ch)
		}
	}
	// alice may view #secret (her overwrite): her send goes through.
	r := w.replyTo(t, w.say(t, w.general.ID, w.alice.ID, fmt.Sprintf("post\n!tool send_message {\"to\":\"channel:%s\",\"text\":\"for mods\"}", w.secret.ID)))
	if !strings.Contains(r.Content, "send_message: sent (message ") {
		t.Fatalf("alice's send_message reply = %q", r.Content)
	}
	finishBot(t, w.harness, w.general.ID, w.secret.ID, w.readonly.ID)
	if n := countContaining(w.emu.Messages(w.secret.ID), "for mods"); n != 1 {
		t.Fatalf("#secret shows alice's message %d times", n)
	}
}

// /focus binds only onto sessions the caller may see: a member cannot bind
// a thread to another user's DM session (and chat with its history), but
// may bind their own. Fails on the old code, which accepted any key.
func TestAuthzE2EFocusAnotherUsersDMRefused(t *testing.T) {
	t.Parallel()
	w := authzStart(t, nil)
	for _, u := range []discordtest.User{w.carol, w.bob} {
		dm, err := w.emu.UserDM(u.ID, "hello bot")
		if err != nil {
			t.Fatal(err)
		}
		w.replyTo(t, dm)
	}
	th, err := w.emu.AddThread(w.general.ID, "bob's", w.bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	carolDM := "agent:main:discord:dm:" + w.carol.ID
	got := w.command(t, th.ID, w.bob.ID, "focus", opt("target", carolDM))
	if !got.Ephemeral || !strings.Contains(got.Content, "may not focus "+carolDM) {
		t.Fatalf("/focus onto carol's DM = %+v", got)
	}
	if recs := w.app.bindings.ListBySession(carolDM); len(recs) != 0 {
		t.Fatalf("carol's DM session got bound: %+v", recs)
	}
	bobDM := "agent:main:discord:dm:" + w.bob.ID
	if got := w.command(t, th.ID, w.bob.ID, "focus", opt("target", bobDM)); !strings.Contains(got.Content, "Bound this thread") {
		t.Fatalf("/focus onto bob's own DM = %+v", got)
	}
	if recs := w.app.bindings.ListBySession(bobDM); len(recs) != 1 {
		t.Fatalf("bob's DM bindings = %+v", recs)
	}
}

// A message discord.access refuses makes no model request, gets no reply
// and is not in any transcript: a denied user, a denied role, and a
// stranger's DM (dm: members); a denied user's /spawn is refused too.
// Fails on the old code, which answered all.
func TestAuthzE2EDeniedMessageMakesNoModelRequest(t *testing.T) {
	t.Parallel()
	var muted discordtest.Role
	var dave discordtest.User
	w := authzStart(t, func(w *authzWorld) {
		var err error
		if muted, err = w.emu.AddRole(w.guild.ID, "muted", 0); err != nil {
			t.Fatal(err)
		}
		if dave, err = w.emu.AddMember(w.guild.ID, "dave"); err != nil {
			t.Fatal(err)
		}
		if err := w.emu.GrantRole(w.guild.ID, dave.ID, muted.ID); err != nil {
			t.Fatal(err)
		}
		w.cfg.Discord.Access.Deny.Users = []string{w.bob.ID}
		w.cfg.Discord.Access.Deny.Roles = []string{muted.ID}
	})
	stranger := w.emu.AddUser("stranger")
	w.refuse(w.say(t, w.general.ID, w.bob.ID, "denied user speaking"))
	w.refuse(w.say(t, w.general.ID, dave.ID, "denied role speaking"))
	if _, err := w.emu.UserDM(stranger.ID, "stranger in a DM"); err != nil {
		t.Fatal(err)
	}
	if got := w.command(t, w.general.ID, w.bob.ID, "spawn", opt("task", "denied spawn")); !got.Ephemeral || !strings.Contains(got.Content, "You may not start agent work here") {
		t.Errorf("/spawn by a denied user = %+v", got)
	}
	// carol's DM and message are admitted; the inbound queue is ordered, so
	// once both are answered the earlier messages were decided.
	carolDM, err := w.emu.UserDM(w.carol.ID, "member in a DM")
	if err != nil {
		t.Fatal(err)
	}
	w.replyTo(t, carolDM)
	w.replyTo(t, w.say(t, w.general.ID, w.carol.ID, "allowed member"))
	reqs := w.model.requests()
	if len(reqs) != 2 {
		t.Errorf("%d model requests, want 2 (carol's two messages)", len(reqs))
	}
	for _, r := range reqs {
		for _, m := range r.Messages {
			for _, refused := range []string{"denied user", "denied role", "stranger"} {
				if strings.Contains(m.Text, refused) {
					t.Errorf("a model request carried the refused message %q", m.Text)
				}
			}
		}
	}
	for _, ch := range []string{w.general.ID} {
		if n := len(botMessages(w.harness, ch, "")); n != 1 {
			t.Errorf("%d bot messages in #general, want 1 (the reply to carol)", n)
		}
	}
	st := finishBot(t, w.harness, w.general.ID)
	for _, e := range seEntries(t, st, seChannelKey(w.general.ID)) {
		if strings.Contains(e.Text, "denied") {
			t.Errorf("a refused message is in the transcript: %+v", e)
		}
	}
	if es := seEntries(t, st, "agent:main:discord:dm:"+stranger.ID); len(es) != 0 {
		t.Errorf("the stranger's DM transcript = %+v", es)
	}
}

// A user over the turn budget gets exactly one short public notice saying
// when they can go on (in the conversation's transcript: Rule 1 holds),
// then silence; after the window, turns are answered again. Operators are
// exempt. Fails on the old code, which had no budget.
func TestAuthzE2ERateLimitOneNotice(t *testing.T) {
	t.Parallel()
	w := authzStart(t, func(w *authzWorld) {
		w.cfg.Discord.Access.RateLimit.Turns = 2
		w.cfg.Discord.Access.RateLimit.Per = time.Hour
	})
	var last discordtest.Message
	for i := range 5 {
		last = w.say(t, w.general.ID, w.bob.ID, fmt.Sprintf("question %d", i))
		if i < 2 {
			w.replyTo(t, last)
		} else {
			w.refuse(last)
		}
	}
	_ = last
	// alice (an operator, exempt) is answered after bob's refused messages were decided.
	for range 3 {
		w.replyTo(t, w.say(t, w.general.ID, w.alice.ID, "operator question"))
	}
	notices := botMessages(w.harness, w.general.ID, "⏳")
	if len(notices) != 1 {
		t.Fatalf("%d notices, want exactly 1: %+v", len(notices), notices)
	}
	if want := "bob, you have used your 2 turns for 1h; you can go on in 1h (at 08:30 UTC)"; !strings.Contains(notices[0].Content, want) {
		t.Errorf("notice = %q, want it to contain %q", notices[0].Content, want)
	}
	if n := len(w.model.requests()); n != 5 {
		t.Errorf("%d model requests, want 5 (bob's 2, alice's 3)", n)
	}
	if n := len(botMessages(w.harness, w.general.ID, "echo:")); n != 5 {
		t.Errorf("%d replies, want 5", n)
	}
	w.fake.Advance(time.Hour)
	w.replyTo(t, w.say(t, w.general.ID, w.bob.ID, "back again"))
	st := finishBot(t, w.harness, w.general.ID)
	n := 0
	for _, e := range seEntries(t, st, seChannelKey(w.general.ID)) {
		if strings.HasPrefix(e.Text, "⏳") {
			n++
			if e.Source != transcript.SourceNotice {
				t.Errorf("notice entry source = %s", e.Source)
			}
		}
		if strings.Contains(e.Text, "question 2") || strings.Contains(e.Text, "question 4") {
			t.Errorf("a refused message is in the transcript: %q", e.Text)
		}
	}
	if n != 1 {
		t.Errorf("%d notice entries in the transcript, want 1", n)
	}
}

// A job posts only where its creator can still view and send: the check
// is repeated before every run. Fails on the old code, which posted.
func TestAuthzE2EJobTargetRecheckedAtRunTime(t *testing.T) {
	t.Parallel()
	w := authzStart(t, nil)
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("add", opt("schedule", "every 1h"), opt("prompt", "mod report"),
		opt("to", "channel:"+w.secret.ID))); !strings.Contains(got.Content, "added") {
		t.Fatalf("/cron add = %q", got.Content)
	}
	// Not even an operator gets a job posting where they may not send.
	if got := w.command(t, w.general.ID, w.alice.ID, "cron", sub("add", opt("schedule", "every 1h"), opt("prompt", "x"),
		opt("to", "channel:"+w.readonly.ID))); !strings.Contains(got.Content, "may not send messages in #readonly") {
		t.Errorf("/cron add to #readonly = %q", got.Content)
	}
	// alice loses her view of #secret.
	if err := w.emu.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: w.alice.ID, Type: discordtest.OverwriteMember}); err != nil {
		t.Fatal(err)
	}
	// The gateway delivers events in order: once a later message is
	// answered, the bot has applied the CHANNEL_UPDATE.
	w.replyTo(t, w.say(t, w.general.ID, w.carol.ID, "barrier"))
	if err := w.app.auth.CanView(t.Context(), w.alice.ID, w.conv(w.secret.ID)); err == nil {
		t.Fatal("the bot still thinks alice can view #secret")
	}
	w.fake.Advance(time.Hour)
	if err := w.app.sched.Scheduler.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	jobs, err := w.app.sched.Scheduler.List(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	runs, err := w.app.sched.Scheduler.Runs(t.Context(), jobs[0].ID, 0)
	if err != nil || len(runs) != 1 || !strings.Contains(runs[0].Error, "not authorized: creator "+w.alice.ID+": the requesting user cannot view #secret") {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	if n := len(botMessages(w.harness, w.secret.ID, "")); n != 0 {
		t.Fatalf("%d bot messages in #secret after alice lost access", n)
	}
}

// refuse records a user message the access policy must refuse (finishBot's
// Rule 1 check then requires it in no transcript).
func (w *authzWorld) refuse(m discordtest.Message) {
	if w.harness.refused == nil {
		w.harness.refused = map[string]bool{}
	}
	w.harness.refused[m.ID] = true
}
