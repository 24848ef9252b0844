package bot

// End-to-end tests of the Discord adapter (issue 4): the real wiring of
// bot/app.go and the real discordgo against the loopback emulator.

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/store/bolt"
)

// ---- helpers (local to the adapter tests) ----

func adOpt(name string, v any) discordtest.CommandOption {
	return discordtest.CommandOption{Name: name, Value: v}
}

// invoke runs a slash command as alice in channel.
func adInvoke(t *testing.T, h *harness, channel, name string, opts ...discordtest.CommandOption) discordtest.Interaction {
	t.Helper()
	in, err := h.emu.InvokeCommand(channel, h.alice.ID, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// responded waits for the interaction's answer (after a deferral, if the
// bot deferred) and returns it.
func adResponded(t *testing.T, h *harness, in discordtest.Interaction) discordtest.InteractionResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, _, err := h.emu.WaitAnswer(ctx, in.ID)
	if err != nil {
		t.Fatalf("no response to /%s: %v", in.Command, err)
	}
	return r
}

// count returns how many messages contain sub.

func adSay(t *testing.T, h *harness, channel, text string) {
	t.Helper()
	if _, err := h.emu.UserSay(channel, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
}

// adCounter reads a counter's value.
func adCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func adMention(h *harness) string { return "<@" + h.emu.BotUserID() + "> " }

// adEndedBindings collects bindings as they end (registered after start).
type adEndedBindings struct {
	mu   sync.Mutex
	recs []binding.Record
	ch   chan struct{}
}

func adWatchEnded(h *harness) *adEndedBindings {
	e := &adEndedBindings{ch: make(chan struct{}, 16)}
	h.onEnded(func(r binding.Record) {
		e.mu.Lock()
		e.recs = append(e.recs, r)
		e.mu.Unlock()
		e.ch <- struct{}{}
	})
	return e
}

func (e *adEndedBindings) wait(t *testing.T, n int) []binding.Record {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		e.mu.Lock()
		recs := slices.Clone(e.recs)
		e.mu.Unlock()
		if len(recs) >= n {
			return recs
		}
		select {
		case <-e.ch:
		case <-timeout:
			t.Fatalf("waited for %d ended bindings, have %d", n, len(recs))
		}
	}
}

// adGatedModel is an OpenAI-compatible fake whose subagent tasks marked
// "[hold]" wait until release, so a test can act on a thread before the
// completion arrives. Other requests answer at once.
type adGatedModel struct {
	fake *modeltest.OpenAIFake
	key  string
	gate chan struct{}
	once sync.Once
}

func newAdGatedModel(t *testing.T) *adGatedModel { return newAdGatedModelKey(t, "k") }

// newAdGatedModelKey is a gated model that accepts only the API key key.
func newAdGatedModelKey(t *testing.T, key string) *adGatedModel {
	g := &adGatedModel{fake: modeltest.NewOpenAIFake(t, key), key: key, gate: make(chan struct{})}
	g.fake.Respond(func(b modeltest.Body) modeltest.Reply {
		last := ""
		msgs, _ := b["messages"].([]any)
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok && mm["role"] == "user" {
				last, _ = mm["content"].(string)
			}
		}
		if strings.HasPrefix(last, "Task:") && strings.Contains(last, "[hold]") {
			<-g.gate
		}
		return modeltest.Reply{Text: "result of " + last}
	})
	t.Cleanup(g.release) // before the fake's server closes (cleanups run last-in first-out)
	return g
}

func (g *adGatedModel) release() { g.once.Do(func() { close(g.gate) }) }

func (g *adGatedModel) configure(cfg *config.Config) {
	mc := cfg.Models[config.DefaultModelName]
	mc.Provider, mc.BaseURL, mc.APIKey, mc.Model = "openai", g.fake.URL, g.key, "m"
	cfg.Models[config.DefaultModelName] = mc
}

// spawnThread runs /spawn thread:true in #general and returns the new thread.
func adSpawnThread(t *testing.T, h *harness, task, label string) string {
	t.Helper()
	before := len(h.emu.Threads(h.general.ID))
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", task), adOpt("label", label), adOpt("thread", true))
	// The reply comes after Spawn returned, so the intro's send (and its
	// binding touch) has finished, not only become visible.
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	var thread string
	waitUntil(t, h, "the "+label+" thread with its intro", func() bool {
		ths := h.emu.Threads(h.general.ID)
		if len(ths) <= before {
			return false
		}
		thread = ths[len(ths)-1].ID
		return countContaining(h.emu.Messages(thread), "session active") == 1
	})
	return thread
}

func adBindingOf(t *testing.T, h *harness, thread string) binding.Record {
	t.Helper()
	recs, err := h.app.bindings.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Conversation.ConversationID == thread {
			return r
		}
	}
	t.Fatalf("no binding for thread %s", thread)
	return binding.Record{}
}

// ---- tests ----

// TestBotRunAnswersMention: `bot run` against the emulator connects,
// registers the slash commands by bulk overwrite, answers a mention and
// ignores a message that does not mention it.
func TestBotRunAnswersMention(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	var names []string
	for _, c := range h.emu.Commands("") {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if want := []string{"agents", "cron", "focus", "memory", "ps", "reset", "session", "spawn", "stop", "unfocus", "usage"}; !slices.Equal(names, want) {
		t.Fatalf("registered commands %v, want %v", names, want)
	}
	if n := len(h.emu.RequestsTo("PUT", "/applications/{application_id}/commands")); n != 1 {
		t.Fatalf("%d bulk overwrites, want 1", n)
	}
	adSay(t, h, h.general.ID, "nobody asked the bot")
	adSay(t, h, h.general.ID, adMention(h)+"hello there")
	msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	reply := msgs[2]
	if reply.Author.ID != h.emu.BotUserID() || !strings.Contains(reply.Content, "hello there") {
		t.Fatalf("reply = %q by %s", reply.Content, reply.Author.Username)
	}
	if reply.MessageReference == nil || reply.MessageReference.MessageID != msgs[1].ID {
		t.Fatalf("reply does not reference the mention: %+v", reply.MessageReference)
	}
	if reply.Nonce == "" || !strings.Contains(string(reply.AllowedMentions), `"parse":[]`) {
		t.Fatalf("reply nonce %q allowed_mentions %s", reply.Nonce, reply.AllowedMentions)
	}
	finishBot(t, h, h.general.ID)
	if n := len(h.emu.Messages(h.general.ID)); n != 3 {
		t.Fatalf("#general has %d messages, want 3 (the unmentioned one answered?)", n)
	}
}

// TestNewestTokenAfterManagerReuse: after a token rotation the reused
// thread manager's next REST call carries the new token (the emulator
// rejects it: it knows only the old one); rotating back works again with
// the same adapter and managers.
func TestNewestTokenAfterManagerReuse(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	a := h.app.discord
	// The gateway refuses the rotated token; the adapter identifies again
	// with the previous one (an interaction sent meanwhile would be lost,
	// as on Discord): wait for it.
	ids0 := h.emu.GatewayStats().Identifies
	a.SetToken("rotated-token")
	waitUntil(t, h, "the refused IDENTIFY and the one with the previous token", func() bool {
		st := h.emu.GatewayStats()
		return st.AuthFailures == 1 && st.Identifies > ids0
	})
	mark := len(h.emu.Requests())
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "first"), adOpt("label", "one"), adOpt("thread", true))
	r := adResponded(t, h, in)
	if !strings.HasPrefix(r.Content, "⚠️") {
		t.Fatalf("spawn with a token the emulator rejects answered %q", r.Content)
	}
	reqs := h.emu.Requests()[mark:]
	sawRotated := false
	for _, q := range reqs {
		if strings.HasPrefix(q.Path, "/interactions/") || strings.HasPrefix(q.Path, "/webhooks/") {
			continue
		}
		if q.Auth != "Bot rotated-token" {
			t.Errorf("%s %s carried %q after rotation", q.Method, q.Path, q.Auth)
		}
		sawRotated = true
	}
	if !sawRotated {
		t.Fatal("no bot REST call after rotation")
	}
	// Rotating back re-identifies the gateway (an interaction sent while
	// it reconnects would be lost, as on Discord): wait for it.
	ids := h.emu.GatewayStats().Identifies
	a.SetToken(h.emu.Token())
	waitUntil(t, h, "the IDENTIFY with the valid token", func() bool { return h.emu.GatewayStats().Identifies > ids })
	mark = len(h.emu.Requests())
	thread := adSpawnThread(t, h, "second", "two")
	for _, q := range h.emu.Requests()[mark:] {
		if q.Auth != "" && q.Auth != "Bot "+h.emu.Token() {
			t.Errorf("%s %s carried %q after rotating back", q.Method, q.Path, q.Auth)
		}
	}
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "finished:") == 1 })
	finishBot(t, h, h.general.ID, thread)
}

// TestWebhookSendTouchesBinding: a webhook send into a bound thread moves
// the binding's LastActivityAt to the send time.
func TestWebhookSendTouchesBinding(t *testing.T) {
	t.Parallel()
	g := newAdGatedModel(t)
	h := startBot(t, nil, g.configure)
	thread := adSpawnThread(t, h, "[hold] wait", "toucher")
	before := adBindingOf(t, h, thread)
	if !before.LastActivityAt.After(before.BoundAt) {
		t.Fatalf("the intro (a webhook send) did not touch the binding: bound %v, activity %v", before.BoundAt, before.LastActivityAt)
	}
	start := time.Now()
	_, err := h.app.outbound.Deliver(t.Context(), delivery.Delivery{ID: "test:touch", Target: before.Conversation, Text: "a note from the persona",
		Persona: delivery.Persona{Name: "🤖 toucher"}, ViaWebhook: true, BindingID: before.ID,
		Producer: delivery.Producer{Source: transcript.SourceMessageTool}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := adBindingOf(t, h, thread)
	if !after.LastActivityAt.After(before.LastActivityAt) || after.LastActivityAt.Before(start) {
		t.Fatalf("LastActivityAt %v -> %v, want a time after %v", before.LastActivityAt, after.LastActivityAt, start)
	}
	msgs := h.emu.Messages(thread)
	last := msgs[len(msgs)-1]
	if last.Content != "a note from the persona" || last.WebhookID == "" || last.Author.Username != "🤖 toucher" {
		t.Fatalf("last thread message = %+v", last)
	}
	g.release()
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "finished:") == 1 })
	// The activity is flushed to the store on shutdown.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Bindings(t.Context())
	st.Close()
	if err != nil || len(recs) != 1 || recs[0].LastActivityAt.Before(after.LastActivityAt) {
		t.Fatalf("stored bindings %+v (%v), want activity at or after %v", recs, err, after.LastActivityAt)
	}
	finishBot(t, h, h.general.ID, thread)
}

// TestTwoBoundSubagentsSameParentNeverInParent: two subagents spawned
// with threads from #general complete together; each completion is in its
// own thread once, none is in #general (invariant 7).
func TestTwoBoundSubagentsSameParentNeverInParent(t *testing.T) {
	t.Parallel()
	g := newAdGatedModel(t)
	h := startBot(t, nil, g.configure)
	t1 := adSpawnThread(t, h, "[hold] alpha work", "alpha")
	t2 := adSpawnThread(t, h, "[hold] beta work", "beta")
	if t1 == t2 {
		t.Fatal("both subagents got the same thread")
	}
	g.release()
	waitUntil(t, h, "both completions", func() bool {
		return countContaining(h.emu.Messages(t1), "finished:") >= 1 && countContaining(h.emu.Messages(t2), "finished:") >= 1
	})
	finishBot(t, h, h.general.ID, t1, t2)
	for thread, label := range map[string]string{t1: "alpha", t2: "beta"} {
		msgs := h.emu.Messages(thread)
		if n := countContaining(msgs, label+" finished:"); n != 1 {
			t.Errorf("%s's thread shows its completion %d times", label, n)
		}
		if n := countContaining(msgs, "finished:"); n != 1 {
			t.Errorf("%s's thread shows %d completions", label, n)
		}
		for _, m := range msgs {
			if strings.Contains(m.Content, "finished:") && (m.WebhookID == "" || m.Author.Username != "🤖 "+label) {
				t.Errorf("%s's completion was not posted under its persona: %+v", label, m)
			}
		}
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "finished:"); n != 0 {
		t.Errorf("#general shows %d completions, want 0", n)
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "result of"); n != 0 {
		t.Errorf("#general shows a result %d times", n)
	}
}

// TestBoundCompletionResolvesOnlyToThread: the router resolves a bound
// subagent's completion to its thread only, and the completion is
// displayed there and in the subagent's transcript, not the requester's.
func TestBoundCompletionResolvesOnlyToThread(t *testing.T) {
	t.Parallel()
	g := newAdGatedModel(t)
	h := startBot(t, nil, g.configure)
	thread := adSpawnThread(t, h, "[hold] resolve me", "resolver")
	rec := adBindingOf(t, h, thread)
	requester := discordRef(h.general.ID)
	dec := h.app.router.ResolveDestination(delivery.RouteRequest{EventKind: delivery.EventTaskCompletion, TargetSessionKey: rec.TargetSessionKey, Requester: &requester, FailClosed: true})
	if dec.Mode != delivery.ModeBound || dec.Binding.Conversation.ConversationID != thread {
		t.Fatalf("decision = %+v, want bound to %s", dec, thread)
	}
	g.release()
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "resolver finished:") == 1 })
	st := finishBot(t, h, h.general.ID, thread)
	if n := countContaining(h.emu.Messages(h.general.ID), "finished:"); n != 0 {
		t.Fatalf("#general shows the completion %d times", n)
	}
	sub, _ := st.Range(t.Context(), rec.TargetSessionKey, 0, 0)
	parent, _ := st.Range(t.Context(), adSessionKey(h.general.ID), 0, 0)
	if adCountEntries(sub, transcript.SourceAnnounce) != 1 || adCountEntries(parent, transcript.SourceAnnounce) != 0 {
		t.Fatalf("announce entries: subagent %d, #general %d; want 1 and 0", adCountEntries(sub, transcript.SourceAnnounce), adCountEntries(parent, transcript.SourceAnnounce))
	}
}

func adSessionKey(channel string) string {
	return "agent:main:discord:channel:" + channel
}

func adCountEntries(es []transcript.Entry, src transcript.Source) int {
	n := 0
	for _, e := range es {
		if e.Source == src {
			n++
		}
	}
	return n
}

// TestThreadBindingsDisabledKeepsUnboundPath: with threadBindings.enabled
// false, /spawn thread:true creates no thread, no webhook and no binding,
// and the completion goes to the requester channel (invariant 8).
func TestThreadBindingsDisabledKeepsUnboundPath(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, func(c *config.Config) { c.Discord.ThreadBindings.Enabled = false })
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "plain work"), adOpt("label", "plain"), adOpt("thread", true)))
	if !strings.Contains(r.Content, "without a thread") {
		t.Fatalf("spawn reply %q", r.Content)
	}
	waitUntil(t, h, "the completion in #general", func() bool { return countContaining(h.emu.Messages(h.general.ID), "plain finished:") == 1 })
	f := adResponded(t, h, adInvoke(t, h, h.general.ID, "focus", adOpt("target", "plain")))
	if f.Flags&discordtest.FlagEphemeral == 0 || !strings.Contains(f.Content, "disabled") {
		t.Fatalf("/focus with bindings disabled answered %+v", f)
	}
	recs, err := h.app.bindings.All(t.Context())
	if err != nil || len(recs) != 0 {
		t.Fatalf("bindings = %+v (%v), want none", recs, err)
	}
	finishBot(t, h, h.general.ID)
	if ths := h.emu.Threads(h.general.ID); len(ths) != 0 {
		t.Errorf("threads created: %+v", ths)
	}
	if hooks := h.emu.Webhooks(h.general.ID); len(hooks) != 0 {
		t.Errorf("webhooks created: %+v", hooks)
	}
	for _, route := range []string{"/channels/{channel_id}/threads", "/channels/{channel_id}/webhooks", "/channels/{channel_id}/messages/{message_id}/threads"} {
		if n := len(h.emu.RequestsTo("POST", route)); n != 0 {
			t.Errorf("%d POST %s requests", n, route)
		}
	}
	for _, q := range h.emu.Requests() {
		if strings.HasPrefix(q.Path, "/webhooks/") && !strings.HasPrefix(q.Path, "/webhooks/"+h.emu.ApplicationID()+"/") {
			t.Errorf("webhook request %s %s", q.Method, q.Path)
		}
	}
}

// TestBoundThreadGoneFailsClosed: archiving, locking or deleting a bound
// thread ends its binding with a reason; the completion that follows is
// posted nowhere, and #general gets a notice without the result
// (invariant 6).
func TestBoundThreadGoneFailsClosed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		act    func(e *discordtest.Emulator, id string) error
		reason string
	}{
		{"archive", func(e *discordtest.Emulator, id string) error { return e.ArchiveThread(id) }, binding.ReasonThreadArchive},
		{"lock", func(e *discordtest.Emulator, id string) error { return e.LockThread(id, false) }, binding.ReasonThreadLocked},
		{"delete", func(e *discordtest.Emulator, id string) error { return e.DeleteChannel(id) }, binding.ReasonThreadDelete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newAdGatedModel(t)
			h := startBot(t, nil, g.configure)
			ended := adWatchEnded(h)
			thread := adSpawnThread(t, h, "[hold] secret-result-"+tc.name, "gone")
			rec := adBindingOf(t, h, thread)
			if err := tc.act(h.emu, thread); err != nil {
				t.Fatal(err)
			}
			recs := ended.wait(t, 1)
			if recs[0].ID != rec.ID || recs[0].EndedReason != tc.reason {
				t.Fatalf("ended %+v, want %s with reason %s", recs[0], rec.ID, tc.reason)
			}
			after := adBindingOf(t, h, thread)
			if after.Status != binding.StatusEnded || after.EndedReason != tc.reason {
				t.Fatalf("stored binding %s/%s", after.Status, after.EndedReason)
			}
			threadBefore := len(h.emu.Messages(thread))
			g.release()
			waitUntil(t, h, "the notice in #general", func() bool {
				return countContaining(h.emu.Messages(h.general.ID), "was not posted") == 1
			})
			info, _ := h.app.sessions.Info(rec.TargetSessionKey)
			if info.Status != session.StatusUndeliver || !strings.Contains(info.Result, "secret-result") {
				t.Fatalf("subagent info %s %q: the result must be kept", info.Status, info.Result)
			}
			finishBot(t, h, h.general.ID, thread)
			if n := len(h.emu.Messages(thread)); n != threadBefore {
				t.Errorf("the thread got %d new messages", n-threadBefore)
			}
			if n := countContaining(h.emu.Messages(h.general.ID), "secret-result"); n != 0 {
				t.Errorf("#general shows the result %d times", n)
			}
			if ch, _ := h.emu.Channel(thread); tc.name == "archive" && !ch.Archived {
				t.Errorf("the bot unarchived the thread")
			}
		})
	}
}

// TestUnknownWebhookRecreatedOnce: a webhook deleted by a moderator is
// dropped on 10015 and recreated once; the send lands once.
func TestUnknownWebhookRecreatedOnce(t *testing.T) {
	t.Parallel()
	g := newAdGatedModel(t)
	h := startBot(t, nil, g.configure)
	thread := adSpawnThread(t, h, "[hold] hooked", "hooked")
	hooks := h.emu.Webhooks(h.general.ID)
	if len(hooks) != 1 {
		t.Fatalf("webhooks after the intro: %+v", hooks)
	}
	if err := h.emu.DeleteWebhook(hooks[0].ID); err != nil {
		t.Fatal(err)
	}
	g.release()
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "hooked finished:") == 1 })
	now := h.emu.Webhooks(h.general.ID)
	if len(now) != 1 || now[0].ID == hooks[0].ID {
		t.Fatalf("webhooks after recreation: %+v", now)
	}
	if n := len(h.emu.RequestsTo("POST", "/channels/{channel_id}/webhooks")); n != 2 {
		t.Fatalf("%d webhook creates, want 2", n)
	}
	msgs := h.emu.Messages(thread)
	if last := msgs[len(msgs)-1]; last.WebhookID != now[0].ID {
		t.Fatalf("completion posted by %q, want the new webhook %s", last.WebhookID, now[0].ID)
	}
	finishBot(t, h, h.general.ID, thread)
	if n := countContaining(h.emu.Messages(thread), "finished:"); n != 1 {
		t.Fatalf("%d completions in the thread", n)
	}
}

// TestAmbiguousThreadCreateMakesOneThread: the thread create is committed
// but the response is lost; the bot finds the thread instead of creating a
// second one.
func TestAmbiguousThreadCreateMakesOneThread(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/threads", Mode: discordtest.FaultDropAfterCommit})
	thread := adSpawnThread(t, h, "ambiguous", "amb")
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "amb finished:") == 1 })
	if rec := adBindingOf(t, h, thread); rec.Conversation.ParentConversationID != h.general.ID {
		t.Fatalf("binding %+v", rec.Conversation)
	}
	finishBot(t, h, h.general.ID, thread)
	if ths := h.emu.Threads(h.general.ID); len(ths) != 1 {
		t.Fatalf("%d threads, want 1", len(ths))
	}
	if n := len(h.emu.RequestsTo("POST", "/channels/{channel_id}/threads")); n != 1 {
		t.Fatalf("%d thread creates, want 1 (reconcile before retry)", n)
	}
}

// TestRateLimitedSendArrivesOnce: a 429 with retry_after on message create
// is waited out; the reply is displayed once and the 429 is counted.
func TestRateLimitedSendArrivesOnce(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Status: 429, RetryAfter: 50 * time.Millisecond})
	adSay(t, h, h.general.ID, adMention(h)+"through the limit")
	if _, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2); err != nil {
		t.Fatal(err)
	}
	// The request log entry lands after the message is displayed: wait for it too.
	posts, err := h.emu.WaitRequests(t.Context(), "POST", "/channels/{channel_id}/messages", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(posts) != 2 || posts[0].Status != 429 || posts[1].Status != 200 {
		t.Fatalf("message creates: %+v", posts)
	}
	finishBot(t, h, h.general.ID) // also lets discordgo's async event handlers finish
	if n := adCounter(h.app.metrics.RateLimited); n != 1 {
		t.Errorf("rate limited counter = %v, want 1", n)
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "through the limit"); n != 2 {
		t.Fatalf("mention and reply shown %d times, want 2", n)
	}
}

// TestServerErrorRetried: a 500 on message create is retried; a 500 after
// the message was committed is retried with the same nonce, so Discord
// returns the first message and nothing is duplicated.
func TestServerErrorRetried(t *testing.T) {
	t.Parallel()
	for _, mode := range []discordtest.FaultMode{discordtest.FaultReject, discordtest.Fault500AfterCommit} {
		h := startBot(t, nil, nil)
		h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Status: 500, Mode: mode})
		adSay(t, h, h.general.ID, adMention(h)+"retry me")
		waitUntil(t, h, "the retried reply", func() bool {
			posts := h.emu.RequestsTo("POST", "/channels/{channel_id}/messages")
			return len(posts) == 2 && posts[1].Status == 200
		})
		finishBot(t, h, h.general.ID)
		if msgs := h.emu.Messages(h.general.ID); len(msgs) != 2 {
			t.Fatalf("mode %d: #general shows %d messages, want 2", mode, len(msgs))
		}
		if n := adCounter(h.app.metrics.RESTErrors.WithLabelValues("http-500")); n != 1 {
			t.Errorf("mode %d: REST error counter = %v", mode, n)
		}
	}
}

// TestSweeperFindsMissedThreadChanges: threads deleted or archived while
// the bot was down (no gateway event reaches it) are found by the sweeper;
// a transient probe failure keeps the binding.
func TestSweeperFindsMissedThreadChanges(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	deleted := adSpawnThread(t, h, "one", "deleted")
	archived := adSpawnThread(t, h, "two", "archived")
	kept := adSpawnThread(t, h, "three", "kept")
	waitUntil(t, h, "the completions", func() bool {
		return countContaining(h.emu.Messages(deleted), "finished:")+countContaining(h.emu.Messages(archived), "finished:")+countContaining(h.emu.Messages(kept), "finished:") == 3
	})
	shown := messageIDs(h.emu.Messages(deleted))
	var deletedKey string
	for _, r := range h.app.bindings.Active() {
		if r.Conversation.ConversationID == deleted {
			deletedKey = r.TargetSessionKey
		}
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.DeleteChannel(deleted); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.ArchiveThread(archived); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.app.bindings.Active()); n != 3 {
		t.Fatalf("%d active bindings after restart, want 3 (no event reached the bot)", n)
	}
	h.emu.InjectFault(discordtest.Fault{Method: "GET", Path: "/channels/" + kept, Status: 502, Times: -1})
	h.app.gateway.Sweep(t.Context())
	h.emu.ClearFaults()
	for thread, want := range map[string]string{deleted: binding.ReasonThreadDelete, archived: binding.ReasonThreadArchive, kept: ""} {
		rec := adBindingOf(t, h, thread)
		if rec.EndedReason != want || (want == "") != (rec.Status == binding.StatusActive) {
			t.Errorf("thread %s: binding %s/%q, want reason %q", thread, rec.Status, rec.EndedReason, want)
		}
	}
	// The deleted thread's messages left the history (invariant 17), as a
	// THREAD_DELETE the bot had seen would have made them.
	st := finishBot(t, h, h.general.ID, archived, kept)
	erased := 0
	for _, e := range seEntries(t, st, deletedKey) {
		if len(e.MessageIDs) == 0 || !slices.Contains(shown, e.MessageIDs[0]) {
			continue
		}
		if !e.Deleted {
			t.Errorf("entry #%d (%s) displayed in the thread deleted while the bot was down is still model-visible: %q", e.Seq, e.Source, e.Text)
		} else {
			erased++
		}
	}
	if erased == 0 {
		t.Errorf("no entry of the deleted thread was found in %s", deletedKey)
	}
}

// TestGracefulShutdownAndRestart: stop returns nil and closes the store;
// a second start on the same store keeps the bindings, and a message in
// the bound thread still reaches the subagent's session.
func TestGracefulShutdownAndRestart(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	thread := adSpawnThread(t, h, "persist", "survivor")
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "finished:") == 1 })
	before := adBindingOf(t, h, thread)
	if err := h.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The store is closed: another process can open it at once.
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("store still locked after stop: %v", err)
	}
	st.Close()
	if err := h.start(t.Context()); err != nil {
		t.Fatalf("second start: %v", err)
	}
	after := adBindingOf(t, h, thread)
	if after.ID != before.ID || after.Status != binding.StatusActive || after.TargetSessionKey != before.TargetSessionKey {
		t.Fatalf("binding after restart %+v, before %+v", after, before)
	}
	n := len(h.emu.Messages(thread))
	adSay(t, h, thread, "still there?")
	msgs, err := h.emu.WaitMessages(t.Context(), thread, n+2)
	if err != nil {
		t.Fatal(err)
	}
	// The subagent's session answers under its persona (echo answers with its task).
	if r := msgs[n+1]; r.WebhookID == "" || r.Author.Username != "🤖 survivor" || r.Content != "Done: persist" {
		t.Fatalf("reply in the bound thread: %+v", r)
	}
	finishBot(t, h, h.general.ID, thread)
}

// TestMetricsExposed: /healthz, /readyz and /metrics are served on
// http.listen with the bot's metrics.
func TestMetricsExposed(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:0" })
	var addr string
	select {
	case addr = <-h.app.httpAddr:
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP server did not start")
	}
	// Turns of one session run one after another: once the second reply
	// shows, the first delivery has finished (and was counted).
	adSay(t, h, h.general.ID, adMention(h)+"count me")
	if _, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2); err != nil {
		t.Fatal(err)
	}
	adSay(t, h, h.general.ID, adMention(h)+"and me")
	if _, err := h.emu.WaitMessages(t.Context(), h.general.ID, 4); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p); code != 200 {
			t.Errorf("GET %s = %d %s", p, code, body)
		}
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{`agentbot_deliveries_total{`, `agentbot_inbound_messages_total{decision="routed"} 2`, "agentbot_active_bindings 0",
		"agentbot_turn_seconds_count", "agentbot_discord_rate_limited_total 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	finishBot(t, h, h.general.ID)
}

// TestGuildAllowlistRegistersGuildCommands: with discord.guilds set, slash
// commands are registered per guild (applied at once by Discord), none
// globally, and they work there; a mention in a guild outside the list is
// ignored.
func TestGuildAllowlistRegistersGuildCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	h.cfg.Discord.Guilds = []string{h.guild.ID}
	other := h.emu.AddGuild("elsewhere")
	otherCh, err := h.emu.AddTextChannel(other.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := h.emu.AddMember(other.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(h.emu.Commands("")); n != 0 {
		t.Fatalf("%d global commands, want none", n)
	}
	if n := len(h.emu.Commands(h.guild.ID)); n != len(discord.Commands()) {
		t.Fatalf("%d guild commands, want %d", n, len(discord.Commands()))
	}
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "reset")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.emu.WaitAnswer(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	// bob is the member of the other guild (the emulator, like Discord, refuses a non-member's post).
	if _, err := h.emu.UserSay(otherCh.ID, bob.ID, "<@"+h.emu.BotUserID()+"> anyone?"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> here?"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.WaitMessages(ctx, h.general.ID, 3); err != nil { // /reset answer, mention, reply
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(h.emu.Messages(otherCh.ID)); n != 1 {
		t.Fatalf("the guild outside the allowlist shows %d messages, want only the user's", n)
	}
}

// TestSpawnWithoutThreadPermissionExplains: a channel where the bot may not
// create threads gets an ephemeral explanation, and no subagent starts.
func TestSpawnWithoutThreadPermissionExplains(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	const createPublicThreads = 1 << 35 // Discord's CREATE_PUBLIC_THREADS permission bit
	if err := h.emu.DenyBot(h.general.ID, createPublicThreads); err != nil {
		t.Fatal(err)
	}
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "x"), adOpt("thread", true))
	if r := adResponded(t, h, in); !r.Ephemeral || !strings.Contains(r.Content, "Create Public Threads") {
		t.Fatalf("answer %+v, want an ephemeral explanation", r)
	}
	finishBot(t, h, h.general.ID)
	if n := len(h.app.sessions.Sessions(nil)); n != 0 {
		t.Fatalf("%d sessions registered after a refused spawn", n)
	}
}

// TestCatchUpReachesChannelWithoutWatermark: a mention posted while the bot
// was down, in a channel it never took a message from, is answered at the
// next start (before, catch-up read only conversations with a watermark).
func TestCatchUpReachesChannelWithoutWatermark(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	mention := "<@" + h.emu.BotUserID() + "> "
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, mention+"first"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the first reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "echo: @") == 1 })
	quiet, err := h.emu.AddTextChannel(h.guild.ID, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := h.emu.UserSay(quiet.ID, h.alice.ID, mention+"while you were away"); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the missed mention's reply", func() bool {
		return countContaining(h.emu.Messages(quiet.ID), "echo: @agentbot while you were away") == 1
	})
	finishBot(t, h, h.general.ID, quiet.ID)
}
