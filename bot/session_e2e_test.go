package bot

// End-to-end tests of agent sessions (issue 5): the real wiring of
// bot/app.go, real discordgo and the loopback emulator, with the echo
// model (wrapped to record requests or hold subagent tasks).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/bolt"
)

// seModel is echo that records every request and holds subagent tasks
// containing "[hold]" until released.
type seModel struct {
	mu      sync.Mutex
	reqs    []model.Request
	held    chan string // receives a held task when it starts waiting
	release chan struct{}
	once    sync.Once
}

func newSEModel(t *testing.T) *seModel {
	m := &seModel{held: make(chan string, 8), release: make(chan struct{})}
	t.Cleanup(m.releaseAll)
	return m
}

func (m *seModel) releaseAll() { m.once.Do(func() { close(m.release) }) }

func (m *seModel) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if strings.Contains(req.System, "Task:") && strings.Contains(req.System, "[hold]") {
		m.held <- req.System
		select {
		case <-m.release:
		case <-ctx.Done():
		}
	}
	return echo.New().Complete(ctx, req)
}

func (m *seModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// waitHeld waits until n held tasks are waiting.
func (m *seModel) waitHeld(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-m.held:
		case <-time.After(20 * time.Second):
			t.Fatal("the subagent task did not reach the model")
		}
	}
}

func seEntries(t *testing.T, st *bolt.Store, key string) []transcript.Entry {
	t.Helper()
	es, err := st.Range(t.Context(), key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func seChannelKey(id string) string { return "agent:main:discord:channel:" + id }

// seSpawn runs /spawn in #general as alice and returns the interaction.
func seSpawn(t *testing.T, h *harness, task, label string, thread bool) discordtest.Interaction {
	t.Helper()
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "spawn", discordtest.CommandOption{Name: "task", Value: task},
		discordtest.CommandOption{Name: "label", Value: label}, discordtest.CommandOption{Name: "thread", Value: thread})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, _, err := h.emu.WaitAnswer(ctx, in.ID); err != nil {
		t.Fatalf("no answer to /spawn: %v", err)
	}
	return in
}

// seThreadOf waits for the thread of the subagent labelled label.
func seThreadOf(t *testing.T, h *harness, label string) string {
	t.Helper()
	var id string
	waitUntil(t, h, "the "+label+" thread", func() bool {
		for _, th := range h.emu.Threads(h.general.ID) {
			if strings.Contains(th.Name, label) {
				id = th.ID
				return true
			}
		}
		return false
	})
	return id
}

// Mention the bot -> a reply to that message, in both the channel and its
// transcript.
func TestSessionE2EMentionReply(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	msg, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> hello there")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := msgs[1]
	if r.Author.ID != h.emu.BotUserID() || r.MessageReference == nil || r.MessageReference.MessageID != msg.ID || !strings.HasPrefix(r.Content, "echo: ") || !strings.Contains(r.Content, "hello there") {
		t.Fatalf("reply = %+v", r)
	}
	st := finishBot(t, h, h.general.ID)
	es := seEntries(t, st, seChannelKey(h.general.ID))
	if len(es) != 2 || es[0].Source != transcript.SourceUser || es[0].MessageIDs[0] != msg.ID || es[1].Source != transcript.SourceTurn || es[1].MessageIDs[0] != r.ID {
		t.Fatalf("transcript = %+v", es)
	}
}

// /spawn thread:true -> a new thread with the persona's intro and the
// completion there only.
func TestSessionE2ESpawnThread(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	seSpawn(t, h, "summarise the plan", "planner", true)
	thread := seThreadOf(t, h, "planner")
	msgs, err := h.emu.WaitMessages(t.Context(), thread, 2)
	if err != nil {
		t.Fatal(err)
	}
	intro, done := msgs[0], msgs[1]
	for _, m := range msgs {
		if m.WebhookID == "" || m.Author.Username != "🤖 planner" {
			t.Fatalf("thread message not posted as the persona: %+v", m)
		}
	}
	if !strings.Contains(intro.Content, "planner session active") || done.Content != "✅ planner finished:\nDone: summarise the plan" {
		t.Fatalf("thread shows %q, %q", intro.Content, done.Content)
	}
	st := finishBot(t, h, h.general.ID, thread)
	if n := countContaining(h.emu.Messages(h.general.ID), "finished"); n != 0 {
		t.Fatalf("#general shows the completion %d times", n)
	}
	if n := len(h.emu.Messages(thread)); n != 2 {
		t.Fatalf("thread shows %d messages", n)
	}
	recs, _ := st.Bindings(t.Context())
	if len(recs) != 1 || recs[0].TargetKind != binding.KindSubagent || recs[0].BoundBy != h.alice.ID || recs[0].Conversation.ConversationID != thread {
		t.Fatalf("bindings = %+v", recs)
	}
	sub := seEntries(t, st, recs[0].TargetSessionKey)
	if len(sub) != 2 || sub[0].Source != transcript.SourceIntro || sub[1].Source != transcript.SourceAnnounce {
		t.Fatalf("subagent transcript = %+v", sub)
	}
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if e.Source == transcript.SourceAnnounce || e.Source == transcript.SourceIntro {
			t.Fatalf("#general transcript holds %+v", e)
		}
	}
}

// Two bound subagents from #general complete at the same time: each
// completion once in its own thread, none in #general (invariant 7).
func TestSessionE2ETwoConcurrentBoundSubagents(t *testing.T) {
	t.Parallel()
	m := newSEModel(t)
	h := startBot(t, m, nil)
	seSpawn(t, h, "[hold] alpha work", "alpha", true)
	seSpawn(t, h, "[hold] beta work", "beta", true)
	m.waitHeld(t, 2) // both runs are in the model at once
	ta, tb := seThreadOf(t, h, "alpha"), seThreadOf(t, h, "beta")
	m.releaseAll()
	waitUntil(t, h, "both completions", func() bool {
		return countContaining(h.emu.Messages(ta), "finished") == 1 && countContaining(h.emu.Messages(tb), "finished") == 1
	})
	st := finishBot(t, h, h.general.ID, ta, tb)
	for th, label := range map[string]string{ta: "alpha", tb: "beta"} {
		if n := countContaining(h.emu.Messages(th), label+" finished:"); n != 1 {
			t.Errorf("%s thread shows its completion %d times", label, n)
		}
		if n := countContaining(h.emu.Messages(th), "finished"); n != 1 {
			t.Errorf("%s thread shows %d completions", label, n)
		}
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "finished"); n != 0 {
		t.Errorf("#general shows %d completions", n)
	}
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if e.Source == transcript.SourceAnnounce {
			t.Errorf("#general transcript holds a completion: %q", e.Text)
		}
	}
}

// A bound thread deleted before its subagent completes: the completion is
// posted nowhere, the binding ends with a reason, #general gets a notice
// without the result (and nothing else of it in its transcript), and the
// result is kept. "event": the bot learnt of the deletion from the
// gateway; "send": only from the failed send (10003).
func TestSessionE2EDeletedBoundThread(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"event", "send"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			m := newSEModel(t)
			h := startBot(t, m, nil)
			seSpawn(t, h, "[hold] secret-result", "doomed", true)
			thread := seThreadOf(t, h, "doomed")
			m.waitHeld(t, 1)
			waitUntil(t, h, "the intro", func() bool { return len(h.emu.Messages(thread)) == 1 })
			var subKey, bindingID string
			for _, r := range h.app.bindings.Active() {
				if r.Conversation.ConversationID == thread {
					subKey, bindingID = r.TargetSessionKey, r.ID
				}
			}
			if subKey == "" {
				t.Fatal("no active binding for the thread")
			}
			ended := make(chan struct{}, 4)
			h.onEnded(func(binding.Record) { ended <- struct{}{} })
			switch how {
			case "event":
				if err := h.emu.DeleteChannel(thread); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ended:
				case <-time.After(20 * time.Second):
					t.Fatal("the binding did not end")
				}
			case "send":
				h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/webhooks/*/*", Status: 404, Code: 10003, Message: "Unknown Channel", Times: -1})
			}
			generalBefore := len(h.emu.Messages(h.general.ID))
			m.releaseAll()
			waitUntil(t, h, "the notice in #general", func() bool { return countContaining(h.emu.Messages(h.general.ID), "was not posted") == 1 })
			// The status is set before the notice is sent.
			in, _ := h.app.sessions.Info(subKey)
			if in.Status != session.StatusUndeliver || !strings.Contains(in.Result, "secret-result") {
				t.Fatalf("result not kept: %+v", in)
			}
			h.emu.ClearFaults()
			st := finishBot(t, h, h.general.ID, thread)
			if n := len(h.emu.Messages(h.general.ID)) - generalBefore; n != 1 {
				t.Errorf("#general got %d messages, want the notice only", n)
			}
			if n := countContaining(h.emu.Messages(h.general.ID), "secret-result"); n != 0 {
				t.Errorf("#general shows the result %d times", n)
			}
			if n := len(h.emu.Messages(thread)); n != 1 {
				t.Errorf("the thread shows %d messages, want the intro only", n)
			}
			var notices, others int
			for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
				switch {
				case e.Source == transcript.SourceNotice:
					notices++
					if strings.Contains(e.Text, "secret-result") {
						t.Errorf("notice holds the result: %q", e.Text)
					}
				case e.Source != transcript.SourceCommand && e.Source != transcript.SourceUser:
					others++
				}
			}
			if notices != 1 || others != 0 {
				t.Errorf("#general transcript: %d notices, %d other bot entries", notices, others)
			}
			recs, _ := st.Bindings(t.Context())
			for _, r := range recs {
				if r.ID == bindingID && (r.Status != binding.StatusEnded || r.EndedReason != binding.ReasonThreadDelete) {
					t.Errorf("binding = %s/%s, want ended/%s", r.Status, r.EndedReason, binding.ReasonThreadDelete)
				}
			}
		})
	}
}

// send_message to another channel lands in that channel's transcript
// (source message-tool), written once.
func TestSessionE2EMessageToolToAnotherChannel(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	other, err := h.emu.AddTextChannel(h.guild.ID, "announcements")
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("<@%s> please post\n!tool send_message {\"to\":\"channel:%s\",\"text\":\"release at noon\"}", h.emu.BotUserID(), other.ID)
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, text); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.WaitMessages(t.Context(), other.ID, 1); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msgs[1].Content, "send_message: sent (message ") {
		t.Fatalf("turn reply = %q", msgs[1].Content)
	}
	st := finishBot(t, h, h.general.ID, other.ID)
	shown := h.emu.Messages(other.ID)
	es := seEntries(t, st, seChannelKey(other.ID))
	if len(shown) != 1 || shown[0].Content != "release at noon" || len(es) != 1 || es[0].Source != transcript.SourceMessageTool || es[0].MessageIDs[0] != shown[0].ID {
		t.Fatalf("#announcements shows %+v, transcript %+v", shown, es)
	}
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if e.Text == "release at noon" {
			t.Fatalf("#general transcript holds the message-tool send")
		}
	}
}

// Replying to a subagent's or a job's message gives the model the note
// from the transcript entry that holds that message id.
func TestSessionE2EReplyContext(t *testing.T) {
	t.Parallel()
	m := newSEModel(t)
	h := startBot(t, m, nil)
	ctx := t.Context()
	// botMsg waits for the bot's (non-interaction) message containing sub.
	// A reply to it is written after its entry: both take #general's send lock.
	botMsg := func(sub string) string {
		var id string
		waitUntil(t, h, "the message "+sub, func() bool {
			for _, m := range h.emu.Messages(h.general.ID) {
				if m.Author.ID == h.emu.BotUserID() && m.InteractionID == "" && strings.Contains(m.Content, sub) {
					id = m.ID
					return true
				}
			}
			return false
		})
		return id
	}
	seSpawn(t, h, "scan the logs", "scout", false)
	sub := botMsg("scout finished")

	if _, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "cron", discordtest.CommandOption{Name: "add", Value: []discordtest.CommandOption{
		{Name: "schedule", Value: "every 1h"}, {Name: "prompt", Value: "post the digest"}, {Name: "target", Value: "isolated"}}}); err != nil {
		t.Fatal(err)
	}
	var jobID string
	waitUntil(t, h, "the job", func() bool {
		jobs, err := h.app.sched.Scheduler.List(ctx)
		if err == nil && len(jobs) == 1 {
			jobID = jobs[0].ID
		}
		return jobID != ""
	})
	if _, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "cron", discordtest.CommandOption{Name: "run", Value: []discordtest.CommandOption{{Name: "id", Value: jobID}}}); err != nil {
		t.Fatal(err)
	}
	job := botMsg("post the digest")

	for _, c := range []struct {
		name, id string
		want     string
	}{
		{"subagent", sub, "result of subagent scout ("},
		{"job", job, "posted by scheduled job " + jobID},
	} {
		n := len(m.requests())
		if _, err := h.emu.UserReply(h.general.ID, h.alice.ID, c.id, "<@"+h.emu.BotUserID()+"> stop this"); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, h, "the model call for the "+c.name+" reply", func() bool { return len(m.requests()) > n })
		req := m.requests()[n]
		last := req.Messages[len(req.Messages)-1]
		note := "[in reply to message " + c.id + " " + c.want
		if last.Role != model.RoleUser || !strings.HasPrefix(last.Text, note) || !strings.HasSuffix(last.Text, "stop this") {
			t.Errorf("%s: the model got %q, want it to start with %q", c.name, last.Text, note)
		}
	}
	waitUntil(t, h, "both replies", func() bool { return countContaining(h.emu.Messages(h.general.ID), "echo: [in reply to message") == 2 })
	finishBot(t, h, h.general.ID)
}

// TestDirectMessageRoundTrip: a DM always reaches the agent (no mention
// needed), the reply lands in the same DM, the DM's session is
// agent:main:discord:dm:<user>, and its transcript equals the DM channel.
func TestDirectMessageRoundTrip(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	m, err := h.emu.UserDM(h.alice.ID, "hello in private")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := h.emu.WaitMessages(t.Context(), m.ChannelID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[1].Author.ID != h.emu.BotUserID() || !strings.Contains(msgs[1].Content, "hello in private") {
		t.Fatalf("DM reply %+v", msgs[1])
	}
	st := finishBot(t, h, m.ChannelID)
	if es := seEntries(t, st, "agent:main:discord:dm:"+h.alice.ID); len(es) != 2 {
		t.Fatalf("DM transcript has %d entries, want 2", len(es))
	}
}

// TestReplyToBotAddressesIt: in a guild channel, a reply to one of the
// bot's messages reaches the agent without a mention; a reply to another
// user's message does not.
func TestReplyToBotAddressesIt(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	first, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> hi")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserReply(h.general.ID, h.alice.ID, first.ID, "talking to myself"); err != nil { // not addressed
		t.Fatal(err)
	}
	if _, err := h.emu.UserReply(h.general.ID, h.alice.ID, msgs[1].ID, "why did you say that?"); err != nil {
		t.Fatal(err)
	}
	got, err := h.emu.WaitMessages(t.Context(), h.general.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got[4].Author.ID != h.emu.BotUserID() || !strings.Contains(got[4].Content, "why did you say that?") {
		t.Fatalf("last message %+v, want the bot's answer to the reply", got[4])
	}
	finishBot(t, h, h.general.ID)
	if n := len(h.emu.Messages(h.general.ID)); n != 5 {
		t.Fatalf("#general shows %d messages, want 5 (the reply to a user's message is not answered)", n)
	}
}
