package bot

// End-to-end tests of the scheduler (issue 6): /cron add against the
// emulator, runs driven by a fake clock (Scheduler.RunDue instead of the
// real cron trigger), Rule 1 and Rule 2 checked on what the channels display
// and what every transcript holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
)

// schedT0 is 08:30 in Berlin (CET) on a Monday.
var schedT0 = time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC)

// schedHarness is a started bot with a fake clock and a second channel #news.
type schedHarness struct {
	*harness
	fake *clock.Fake
	news discordtest.Channel
}

func schedStart(t *testing.T, p model.Provider, configure func(*config.Config)) *schedHarness {
	t.Helper()
	fake := clock.NewFake(schedT0)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Clock: fake, Configure: configure, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	news, err := h.emu.AddTextChannel(h.guild.ID, "news")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &schedHarness{harness: h, fake: fake, news: news}
}

// cron runs /cron <sub> in #general as alice and returns its answer (after
// a deferral, if the bot deferred).
func (h *schedHarness) cron(t *testing.T, sub string, opts ...discordtest.CommandOption) discordtest.InteractionResponse {
	t.Helper()
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "cron", discordtest.CommandOption{Name: sub, Value: opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, _, err := h.emu.WaitAnswer(ctx, in.ID)
	if err != nil {
		t.Fatalf("no answer to /cron %s: %v", sub, err)
	}
	return r
}

func opt(name string, v any) discordtest.CommandOption {
	return discordtest.CommandOption{Name: name, Value: v}
}

// onlyJob returns the one stored job.
func (h *schedHarness) onlyJob(t *testing.T) scheduler.Job {
	t.Helper()
	jobs, err := h.app.sched.Scheduler.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("jobs = %+v", jobs)
	}
	return jobs[0]
}

// runDue is one trigger pass at the fake clock's time. The real cron
// trigger may take the same job concurrently (it also reads the fake
// clock); callers wait for what the run displays.
func (h *schedHarness) runDue(t *testing.T) {
	t.Helper()
	if err := h.app.sched.Scheduler.RunDue(t.Context()); err != nil {
		t.Fatalf("RunDue: %v", err)
	}
}

// botMessages returns the bot's messages in a channel that start with prefix.
func botMessages(h *harness, channel, prefix string) []discordtest.Message {
	var out []discordtest.Message
	for _, m := range h.emu.Messages(channel) {
		if (m.Author.ID == h.emu.BotUserID() || m.WebhookID != "") && strings.HasPrefix(m.Content, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// A /cron add in-chat job with a cron expression in a time zone runs at
// its time: the trigger line and then the reply, in the creating channel and
// its transcript (Rule 1), nowhere else.
func TestSchedE2EInChatJobRunsAtItsTime(t *testing.T) {
	t.Parallel()
	h := schedStart(t, nil, nil)
	r := h.cron(t, "add", opt("schedule", "0 9 * * *"), opt("prompt", "say good morning"), opt("tz", "Europe/Berlin"))
	if r.Ephemeral || !strings.Contains(r.Content, "in-chat") {
		t.Fatalf("/cron add reply = %+v", r)
	}
	j := h.onlyJob(t)
	if j.Mode() != scheduler.ModeInChat || !j.State.NextRunAt.Equal(schedT0.Add(30*time.Minute)) {
		t.Fatalf("job = %+v (next %v)", j, j.State.NextRunAt)
	}
	if !strings.Contains(r.Content, j.ID) {
		t.Fatalf("/cron add reply does not name the job id %s: %q", j.ID, r.Content)
	}
	before := len(h.emu.Messages(h.general.ID))

	// Not due yet: nothing happens.
	h.fake.Advance(29 * time.Minute)
	h.runDue(t)
	if n := len(h.emu.Messages(h.general.ID)); n != before {
		t.Fatalf("the job ran early: %d messages, want %d", n, before)
	}
	// 09:00 Berlin.
	h.fake.Advance(time.Minute)
	h.runDue(t)
	trigger := "⏰ say good morning: say good morning"
	waitUntil(t, h.harness, "the trigger and the reply", func() bool {
		return len(botMessages(h.harness, h.general.ID, trigger)) == 1 && len(botMessages(h.harness, h.general.ID, "echo:")) == 1
	})
	h.runDue(t) // the instant ran: nothing more
	msgs := h.emu.Messages(h.general.ID)[before:]
	if len(msgs) != 2 || msgs[0].Content != trigger || !strings.HasPrefix(msgs[1].Content, "echo:") {
		t.Fatalf("displayed after the add: %+v", msgs)
	}
	if n := len(h.emu.Messages(h.news.ID)); n != 0 {
		t.Fatalf("#news got %d messages", n)
	}

	st := finishBot(t, h.harness, h.general.ID, h.news.ID)
	es := seEntries(t, st, seChannelKey(h.general.ID))
	var trig, reply *transcript.Entry
	for i := range es {
		switch es[i].Source {
		case transcript.SourceJobTrigger:
			trig = &es[i]
		case transcript.SourceTurn:
			reply = &es[i]
		}
	}
	if trig == nil || reply == nil || trig.Text != trigger || trig.MessageIDs[0] != msgs[0].ID || reply.MessageIDs[0] != msgs[1].ID || trig.Seq > reply.Seq {
		t.Fatalf("transcript = %+v", es)
	}
	if trig.Meta["jobId"] != j.ID {
		t.Fatalf("trigger entry meta %v does not name job %s", trig.Meta, j.ID)
	}
	runs, err := st.Runs(t.Context(), j.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != scheduler.StatusOK || runs[0].Late ||
		!runs[0].ScheduledAt.Equal(schedT0.Add(30*time.Minute)) || len(runs[0].Delivery.MessageIDs) != 2 {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
}

// A background job (isolated, to #news) posts only its result in #news,
// once; its prompt and turns stay in the run's own session.
func TestSchedE2EBackgroundJobPostsOnlyResult(t *testing.T) {
	t.Parallel()
	h := schedStart(t, nil, nil)
	prompt := "compile the news digest"
	if r := h.cron(t, "add", opt("schedule", "every 1h"), opt("prompt", prompt), opt("target", "isolated"), opt("to", "channel:"+h.news.ID)); !strings.Contains(r.Content, "background") {
		t.Fatalf("/cron add reply = %+v", r)
	}
	j := h.onlyJob(t)
	generalBefore := len(h.emu.Messages(h.general.ID))

	h.fake.Advance(time.Hour)
	h.runDue(t)
	waitUntil(t, h.harness, "the result in #news", func() bool { return len(h.emu.Messages(h.news.ID)) >= 1 })
	h.runDue(t)
	h.fake.Advance(time.Minute)
	h.runDue(t) // not due again: still one result
	news := h.emu.Messages(h.news.ID)
	if len(news) != 1 || news[0].Author.ID != h.emu.BotUserID() || news[0].Content != "echo: "+prompt {
		t.Fatalf("#news = %+v", news)
	}
	if n := len(h.emu.Messages(h.general.ID)); n != generalBefore {
		t.Fatalf("#general got %d messages from the background run", n-generalBefore)
	}

	st := finishBot(t, h.harness, h.general.ID, h.news.ID)
	runs, err := st.Runs(t.Context(), j.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != scheduler.StatusOK || runs[0].Delivery.Status != scheduler.DeliveryDelivered ||
		len(runs[0].Delivery.MessageIDs) != 1 || runs[0].Delivery.MessageIDs[0] != news[0].ID {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	runKey := runs[0].SessionKey
	if !strings.Contains(runKey, ":cron:"+j.ID+":run:") {
		t.Fatalf("run session key %q", runKey)
	}
	keys, err := st.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, key := range keys {
		for _, e := range seEntries(t, st, key) {
			fromRun := e.Source == transcript.SourceJobTrigger || e.Source == transcript.SourceJob || strings.HasPrefix(e.DeliveryID, "job:"+j.ID)
			switch {
			case key == runKey:
			case key == seChannelKey(h.news.ID) && e.Source == transcript.SourceJob:
				results++
				if e.Text != news[0].Content || e.MessageIDs[0] != news[0].ID || e.Meta["jobId"] != j.ID {
					t.Errorf("result entry %+v", e)
				}
			case fromRun:
				t.Errorf("%s holds an entry of the background run: %+v", key, e)
			case strings.Contains(e.Text, prompt) && e.Source != transcript.SourceCommand:
				// Only the public /cron add reply may quote the prompt.
				t.Errorf("%s holds the prompt: %+v", key, e)
			}
		}
	}
	if results != 1 {
		t.Fatalf("#news transcript holds %d results, want 1", results)
	}
	rk := seEntries(t, st, runKey)
	if len(rk) != 2 || rk[0].Text != prompt || rk[1].Text != news[0].Content {
		t.Fatalf("run session %s = %+v", runKey, rk)
	}
}

// An in-chat job cannot deliver elsewhere: /cron add target:main to:#news is
// refused with an ephemeral explanation, and no job is stored.
func TestSchedE2EInChatJobWithToElsewhereRefused(t *testing.T) {
	t.Parallel()
	h := schedStart(t, nil, nil)
	r := h.cron(t, "add", opt("schedule", "every 1h"), opt("prompt", "post here"), opt("target", "main"), opt("to", "channel:"+h.news.ID))
	if !r.Ephemeral || !strings.Contains(r.Content, "cannot deliver") || !strings.Contains(r.Content, "isolated") {
		t.Fatalf("reply = %+v", r)
	}
	if jobs, err := h.app.sched.Scheduler.List(t.Context()); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	if n := len(h.emu.Messages(h.general.ID)); n != 0 {
		t.Fatalf("#general displays %d messages (an ephemeral reply is displayed nowhere)", n)
	}
	finishBot(t, h.harness, h.general.ID, h.news.ID)
}

// Downtime: the bot is stopped across several scheduled instants; at start
// the job runs once, marked late, and `bot inspect runs` says late=true.
func TestSchedE2ECatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	h := schedStart(t, nil, nil)
	h.cron(t, "add", opt("schedule", "every 1h"), opt("prompt", "hourly check"))
	j := h.onlyJob(t)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.fake.Advance(3*time.Hour + 30*time.Minute) // missed +1h, +2h, +3h
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h.harness, "the late run", func() bool {
		return len(botMessages(h.harness, h.general.ID, "⏰ hourly check (late by")) == 1 && len(botMessages(h.harness, h.general.ID, "echo:")) == 1
	})
	h.runDue(t) // caught up: nothing more
	trig := botMessages(h.harness, h.general.ID, "⏰ hourly check")
	if len(trig) != 1 || !strings.Contains(trig[0].Content, "late by 30m") {
		t.Fatalf("trigger lines = %+v", trig)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	err = Inspect(t.Context(), st, nil, &stdout, "runs", []string{j.ID}, true)
	st.Close()
	if err != nil {
		t.Fatalf("inspect runs: %v", err)
	}
	var ran []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r["status"] == string(scheduler.StatusOK) {
			ran = append(ran, r)
		}
	}
	if len(ran) != 1 || ran[0]["late"] != true || ran[0]["jobId"] != j.ID {
		t.Fatalf("runs:\n%s", stdout.String())
	}
	if want := schedT0.Add(3 * time.Hour).Format(time.RFC3339); ran[0]["scheduledAt"] != want {
		t.Fatalf("scheduledAt = %v, want %s", ran[0]["scheduledAt"], want)
	}
	finishBot(t, h.harness, h.general.ID)
}

// failAlertCheck adds a failing job with add, lets it fail FailureAlert.After
// times and once more within the cooldown (every 10m, backoff shorter than
// that, cooldown 1h), and checks the alert is posted once in #general and in its
// transcript (source alert).
func failAlertCheck(t *testing.T, addOpts ...discordtest.CommandOption) {
	h := schedStart(t, nil, nil)
	h.cron(t, "add", addOpts...)
	j := h.onlyJob(t)
	after := h.cfg.Scheduler.FailureAlert.After
	for i := 1; i <= after+1; i++ {
		next := h.onlyJob(t).State.NextRunAt
		h.fake.Set(next)
		h.runDue(t)
		waitUntil(t, h.harness, fmt.Sprintf("failure %d", i), func() bool {
			runs, _ := h.app.sched.Scheduler.Runs(t.Context(), j.ID, 0)
			n := 0
			for _, r := range runs {
				if r.Status == scheduler.StatusError {
					n++
				}
			}
			return n >= i
		})
		if i < after {
			if n := len(botMessages(h.harness, h.general.ID, "⚠️ Job")); n != 0 {
				t.Fatalf("alert after %d failures", i)
			}
		}
	}
	waitUntil(t, h.harness, "the alert", func() bool { return len(botMessages(h.harness, h.general.ID, "⚠️ Job")) >= 1 })
	alerts := botMessages(h.harness, h.general.ID, "⚠️ Job")
	if len(alerts) != 1 || !strings.Contains(alerts[0].Content, j.ID) || !strings.Contains(alerts[0].Content, "failed") {
		t.Fatalf("alerts = %+v (want one within the cooldown)", alerts)
	}
	st := finishBot(t, h.harness, h.general.ID)
	n := 0
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if e.Source == transcript.SourceAlert {
			n++
			if e.MessageIDs[0] != alerts[0].ID || e.Text != alerts[0].Content || e.Meta["jobId"] != j.ID {
				t.Fatalf("alert entry %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d alert entries in #general's transcript", n)
	}
}

// Failure alerts for a background job delivering to the creating chat.
func TestSchedE2EFailureAlertBackground(t *testing.T) {
	t.Parallel()
	failAlertCheck(t, opt("schedule", "every 10m"), opt("prompt", "check the servers\n!fail server"), opt("target", "isolated"))
}

// Failure alerts for an in-chat job whose turn fails: the chat shows the
// failure notice, and the run counts as failed.
func TestSchedE2EFailureAlertInChat(t *testing.T) {
	t.Parallel()
	failAlertCheck(t, opt("schedule", "every 10m"), opt("prompt", "check the servers\n!fail server"))
}

// "Stop this": a reply to a job's message with a cancel_job call removes
// the job; the model saw the job id in the request (entry meta).
func TestSchedE2EStopThisCancelsJob(t *testing.T) {
	t.Parallel()
	m := newSEModel(t)
	h := schedStart(t, m, nil)
	h.cron(t, "add", opt("schedule", "every 1h"), opt("prompt", "weather report"))
	j := h.onlyJob(t)
	h.fake.Advance(time.Hour)
	h.runDue(t)
	var trig discordtest.Message
	waitUntil(t, h.harness, "the job's messages", func() bool {
		ts := botMessages(h.harness, h.general.ID, "⏰ weather report")
		if len(ts) == 1 {
			trig = ts[0]
		}
		return len(ts) == 1 && len(botMessages(h.harness, h.general.ID, "echo:")) == 1
	})
	nreq := len(m.requests())
	if _, err := h.emu.UserReply(h.general.ID, h.alice.ID, trig.ID, fmt.Sprintf("<@%s> stop this\n!tool cancel_job {\"id\":%q}", h.emu.BotUserID(), j.ID)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h.harness, "the tool result reply", func() bool { return len(botMessages(h.harness, h.general.ID, "tool results:")) == 1 })
	if jobs, err := h.app.sched.Scheduler.List(t.Context()); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after cancel_job = %+v, %v", jobs, err)
	}
	reply := botMessages(h.harness, h.general.ID, "tool results:")[0]
	if !strings.Contains(reply.Content, "removed") {
		t.Fatalf("reply = %q", reply.Content)
	}
	// The request that made the call shows which job posted the trigger.
	reqs := m.requests()[nreq:]
	if len(reqs) == 0 {
		t.Fatal("no model request for the reply")
	}
	var sawJob bool
	for _, msg := range reqs[0].Messages {
		if strings.Contains(msg.Text, "posted by scheduled job "+j.ID) {
			sawJob = true
		}
	}
	if !sawJob {
		t.Fatalf("the model request does not say which job posted: %+v", reqs[0].Messages)
	}
	// The job is gone: advancing the clock runs nothing.
	before := len(h.emu.Messages(h.general.ID))
	h.fake.Advance(2 * time.Hour)
	h.runDue(t)
	if n := len(h.emu.Messages(h.general.ID)); n != before {
		t.Fatalf("the cancelled job ran again")
	}
	finishBot(t, h.harness, h.general.ID)
}
