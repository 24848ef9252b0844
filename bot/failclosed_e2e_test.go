package bot

// End-to-end tests of issue 12's fail-closed defects: a session bound by
// /focus, recovery of a completion, disabled bindings on an existing
// store, /session scope, a non-default agent's completion, and thread
// posts that are not completions.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/bolt"
)

// fcSpawnUnbound runs /spawn thread:false in #general and returns the subagent key.
func fcSpawnUnbound(t *testing.T, h *harness, task, label string) string {
	t.Helper()
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "spawn", adOpt("task", task), adOpt("label", label), adOpt("thread", false)))
	if !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	subs := h.app.sessions.Sessions(func(in session.Info) bool { return in.Label == label })
	if len(subs) != 1 {
		t.Fatalf("subagents labelled %s: %d", label, len(subs))
	}
	return subs[0].Key
}

// fcFocus runs /focus target:label in #general and returns the thread it made.
func fcFocus(t *testing.T, h *harness, label string) string {
	t.Helper()
	before := len(h.emu.Threads(h.general.ID))
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "focus", adOpt("target", label)))
	if !strings.Contains(r.Content, "Created thread") {
		t.Fatalf("/focus answered %q", r.Content)
	}
	ths := h.emu.Threads(h.general.ID)
	if len(ths) != before+1 {
		t.Fatalf("threads after /focus: %d, want %d", len(ths), before+1)
	}
	return ths[len(ths)-1].ID
}

// Defect 1: a subagent spawned without a thread and /focus-ed into one is
// a bound session. Its thread archived before it finished: the result is
// posted nowhere (not in #general), #general gets the notice, the result
// is kept. Focused into a second thread: the binding moves, the first
// thread is told where, the completion appears in the second only.
func TestFocusBoundSubagentNeverFallsBack(t *testing.T) {
	t.Parallel()
	t.Run("archived", func(t *testing.T) {
		t.Parallel()
		g := newAdGatedModel(t)
		h := startBot(t, nil, g.configure)
		ended := adWatchEnded(h)
		key := fcSpawnUnbound(t, h, "[hold] focus-secret", "focused")
		thread := fcFocus(t, h, "focused")
		if err := h.emu.ArchiveThread(thread); err != nil {
			t.Fatal(err)
		}
		ended.wait(t, 1)
		g.release()
		waitUntil(t, h, "the notice in #general", func() bool { return countContaining(h.emu.Messages(h.general.ID), "was not posted") == 1 })
		if info, _ := h.app.sessions.Info(key); info.Status != session.StatusUndeliver || !strings.Contains(info.Result, "focus-secret") {
			t.Fatalf("info %s %q", info.Status, info.Result)
		}
		finishBot(t, h, h.general.ID, thread)
		if n := countContaining(h.emu.Messages(h.general.ID), "focus-secret"); n != 0 {
			t.Fatalf("#general shows the result %d times", n)
		}
		if ch, _ := h.emu.Channel(thread); !ch.Archived || countContaining(h.emu.Messages(thread), "finished") != 0 {
			t.Fatalf("the archived thread was reopened or shows the completion")
		}
	})
	t.Run("two threads", func(t *testing.T) {
		t.Parallel()
		g := newAdGatedModel(t)
		h := startBot(t, nil, g.configure)
		fcSpawnUnbound(t, h, "[hold] twice-secret", "twice")
		first := fcFocus(t, h, "twice")
		second := fcFocus(t, h, "twice")
		waitUntil(t, h, "the move notice in the first thread", func() bool {
			return countContaining(h.emu.Messages(first), "moved to <#"+second+">") == 1
		})
		g.release()
		waitUntil(t, h, "the completion in the second thread", func() bool {
			return countContaining(h.emu.Messages(second), "twice finished:") == 1
		})
		finishBot(t, h, h.general.ID, first, second)
		if n := countContaining(h.emu.Messages(h.general.ID), "twice-secret"); n != 0 {
			t.Fatalf("#general shows the result %d times", n)
		}
		if n := countContaining(h.emu.Messages(first), "twice-secret"); n != 0 {
			t.Fatalf("the first thread shows the result %d times", n)
		}
	})
}

// Defect 2: a completion left pending by a previous process (its send's
// outcome unknown) whose thread was archived while the bot was down is
// recovered through the live path: nothing in the thread (still
// archived), the binding ended with a reason, the notice in #general, and
// the run undelivered with its result kept.
func TestRecoveredCompletionFailsClosedE2E(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	thread, err := h.emu.AddThread(h.general.ID, "crafted", h.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// What a process killed during the completion's send leaves behind.
	key := "agent:main:subagent:crafted1"
	requester := discordRef(h.general.ID)
	tref := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: thread.ID, ParentConversationID: h.general.ID}
	now := time.Now()
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	info := session.Info{Key: key, AgentID: "main", Kind: session.KindSubagent, Parent: adSessionKey(h.general.ID), Requester: requester,
		Label: "crafted", Task: "t", Status: session.StatusOK, Result: "crafted-secret", BindingID: "bcrafted", Thread: thread.ID, SpawnedBy: h.alice.ID, CreatedAt: now, EndedAt: now}
	b := binding.Record{ID: "bcrafted", TargetSessionKey: key, TargetKind: binding.KindSubagent, Conversation: tref, Status: binding.StatusActive,
		AgentID: "main", Label: "crafted", BoundBy: h.alice.ID, BoundAt: now, LastActivityAt: now}
	d := delivery.Delivery{ID: "announce:" + key + ":1", Target: tref, Text: session.CompletionText(info), ViaWebhook: true, BindingID: "bcrafted",
		Persona:  delivery.Persona{Name: "🤖 crafted"},
		Producer: delivery.Producer{Source: transcript.SourceAnnounce, AgentID: "main", Meta: map[string]string{"subagent": key, "label": "crafted", "status": "ok"}}}
	err = errors.Join(st.PutSessionInfo(t.Context(), info), st.PutBindings(t.Context(), b),
		st.PutDelivery(t.Context(), delivery.Record{Delivery: d, State: delivery.StatePending, CreatedAt: now.Add(-time.Minute), UpdatedAt: now}))
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.emu.ArchiveThread(thread.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the notice in #general", func() bool { return countContaining(h.emu.Messages(h.general.ID), "was not posted") == 1 })
	if after := adBindingOf(t, h, thread.ID); after.Status != binding.StatusEnded || after.EndedReason == "" {
		t.Fatalf("binding %s/%q, want ended with a reason", after.Status, after.EndedReason)
	}
	st = finishBot(t, h, h.general.ID, thread.ID) // a graceful stop: the recovery has finished
	infos, err := st.SessionInfos(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Key == key && (in.Status != session.StatusUndeliver || in.AnnouncePending || in.Result != "crafted-secret") {
			t.Fatalf("run after recovery: %s pending=%v %q, want undelivered with its result kept", in.Status, in.AnnouncePending, in.Result)
		}
	}
	if r, _, _ := st.GetDelivery(t.Context(), d.ID); r.State == delivery.StatePending || r.State == delivery.StateDelivered {
		t.Fatalf("completion record left %s", r.State)
	}
	if n := len(h.emu.Messages(thread.ID)); n != 0 {
		t.Fatalf("the thread shows %d messages", n)
	}
	if ch, _ := h.emu.Channel(thread.ID); !ch.Archived {
		t.Fatal("the bot reopened the archived thread")
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "crafted-secret"); n != 0 {
		t.Fatalf("#general shows the result %d times", n)
	}
}

// Defect 7: threadBindings.enabled false on a store that has a binding:
// the thread is its own conversation again (the reply comes from the bot,
// into the thread's own transcript), the router falls back, nothing is
// written to the binding, and enabling the flag again restores it.
func TestDisabledBindingsStopRoutingAndAreKept(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	thread := adSpawnThread(t, h, "kept work", "kept")
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "kept finished:") == 1 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.cfg.Discord.ThreadBindings.Enabled = false
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := adBindingOf(t, h, thread) // as stored (a disabled service indexes nothing)
	n := len(h.emu.Messages(thread))
	adSay(t, h, thread, adMention(h)+"who answers?")
	msgs, err := h.emu.WaitMessages(t.Context(), thread, n+2)
	if err != nil {
		t.Fatal(err)
	}
	if r := msgs[n+1]; r.WebhookID != "" || r.Author.ID != h.emu.BotUserID() {
		t.Fatalf("reply in the thread with bindings disabled: %+v (want the bot itself, no persona)", r)
	}
	requester := discordRef(h.general.ID)
	if dec := h.app.router.ResolveDestination(delivery.RouteRequest{EventKind: delivery.EventTaskCompletion, TargetSessionKey: before.TargetSessionKey, Requester: &requester, FailClosed: true}); dec.Mode != delivery.ModeFallback {
		t.Fatalf("router with bindings disabled: %+v, want fallback", dec)
	}
	s := adResponded(t, h, adInvoke(t, h, thread, "session", adOpt("idle", []discordtest.CommandOption{})))
	if !strings.Contains(s.Content, "not currently bound") {
		t.Fatalf("/session with bindings disabled answered %q", s.Content)
	}
	kept := adBindingOf(t, h, thread)
	if kept.Status != binding.StatusActive || !kept.LastActivityAt.Equal(before.LastActivityAt) || kept.IdleTimeout != before.IdleTimeout {
		t.Fatalf("binding written while disabled: %+v, before %+v", kept, before)
	}
	st := finishBot(t, h, h.general.ID, thread)
	own, _ := st.Range(t.Context(), adSessionKey(thread), 0, 0)
	if len(own) < 2 {
		t.Fatalf("the thread's own transcript has %d entries, want the question and the reply", len(own))
	}
	st.Close()
	h.cfg.Discord.ThreadBindings.Enabled = true
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.app.bindings.ResolveByConversation(discordRef(thread)); !ok || got.ID != before.ID {
		t.Fatalf("binding not restored: %+v %v", got, ok)
	}
	finishBot(t, h, h.general.ID, thread)
}

// Defect 8: /session idle changes this conversation's binding only. A
// store from before bindings moved holds two bindings of one session
// (alice's thread and bob's); bob's /session idle in his thread leaves
// alice's binding as it was.
func TestSessionIdleChangesOnlyThisConversation(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	alices := adSpawnThread(t, h, "shared work", "shared")
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(alices), "shared finished:") == 1 })
	bobs, err := h.emu.AddThread(h.general.ID, "bob's", bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := adBindingOf(t, h, alices)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = st.PutBindings(t.Context(), binding.Record{ID: "legacy-bob", TargetSessionKey: a.TargetSessionKey, TargetKind: binding.KindSubagent,
		Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: bobs.ID, ParentConversationID: h.general.ID},
		Status:       binding.StatusActive, AgentID: "main", BoundBy: bob.ID, BoundAt: now, LastActivityAt: now, IdleTimeout: a.IdleTimeout})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	in, err := h.emu.InvokeCommand(bobs.ID, bob.ID, "session", adOpt("idle", []discordtest.CommandOption{adOpt("duration", "2h")}))
	if err != nil {
		t.Fatal(err)
	}
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "set to 2h") {
		t.Fatalf("/session idle answered %q", r.Content)
	}
	if got := adBindingOf(t, h, bobs.ID); got.IdleTimeout != 2*time.Hour {
		t.Fatalf("bob's binding idle = %v, want 2h", got.IdleTimeout)
	}
	if got := adBindingOf(t, h, alices); got.IdleTimeout != a.IdleTimeout {
		t.Fatalf("alice's binding idle changed to %v by bob's /session (was %v)", got.IdleTimeout, a.IdleTimeout)
	}
	finishBot(t, h, h.general.ID, alices, bobs.ID)
}

// Defect 9: a completion from a non-default agent into an unbound channel
// is displayed there, so it is in that channel's transcript (Rule 1).
func TestOtherAgentCompletionInUnboundChannelIsInTranscript(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, func(c *config.Config) {
		c.Agents = append(c.Agents, config.AgentConfig{ID: "researcher", Name: "Researcher", Model: config.DefaultModelName})
	})
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "look around"), adOpt("label", "res"), adOpt("agent", "researcher"), adOpt("thread", false)))
	if !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	waitUntil(t, h, "the completion in #general", func() bool { return countContaining(h.emu.Messages(h.general.ID), "res finished:") == 1 })
	st := finishBot(t, h, h.general.ID)
	es, err := st.Range(t.Context(), adSessionKey(h.general.ID), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := adCountEntries(es, transcript.SourceAnnounce); n != 1 {
		t.Fatalf("#general's transcript has %d announce entries, want 1", n)
	}
}

// Defect 10: a post that is not a bound completion (here a farewell, as
// after an idle expiry) into an archived thread is refused like any other:
// the thread stays archived and shows nothing.
func TestFarewellDoesNotReopenArchivedThread(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	thread, err := h.emu.AddThread(h.general.ID, "quiet", h.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.ArchiveThread(thread.ID); err != nil { // while the bot is down: it learns it from REST
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	tref := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: thread.ID, ParentConversationID: h.general.ID}
	_, err = h.app.outbound.Deliver(t.Context(), delivery.Delivery{ID: "farewell:test", Target: tref,
		Text: session.FarewellText(binding.ReasonIdleExpired, time.Hour, 0), Producer: delivery.Producer{Source: transcript.SourceFarewell}}, nil)
	if !errors.Is(err, delivery.ErrDestinationGone) {
		t.Fatalf("farewell into an archived thread: %v, want ErrDestinationGone", err)
	}
	finishBot(t, h, h.general.ID, thread.ID)
	if ch, _ := h.emu.Channel(thread.ID); !ch.Archived || len(h.emu.Messages(thread.ID)) != 0 {
		t.Fatalf("archived=%v, %d messages: the farewell reopened the thread", ch.Archived, len(h.emu.Messages(thread.ID)))
	}
}
