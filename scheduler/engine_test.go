package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/scheduler"
)

func TestInChatRunAtItsTime(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "standup", Schedule: "0 9 * * *", Prompt: "ask for updates", Target: "main", AgentID: "main"})
	if j.Mode() != scheduler.ModeInChat {
		t.Fatalf("mode %s", j.Mode())
	}
	e.tick() // 08:59: not due
	if len(e.chat.runs()) != 0 {
		t.Fatal("ran early")
	}
	e.clk.Set(utc(2026, 3, 2, 9, 0))
	e.tick()
	e.tick() // a second pass at the same instant runs nothing
	calls := e.chat.runs()
	if len(calls) != 1 {
		t.Fatalf("%d turns", len(calls))
	}
	in := calls[0]
	if in.Trigger != "⏰ standup: ask for updates" || in.Prompt != "ask for updates" || in.Late ||
		in.DeliveryID != "job:"+j.ID+":run:"+in.RunID {
		t.Fatalf("run %+v", in)
	}
	if in.Conversation.ConversationID != "100" {
		t.Fatalf("wrong chat: %+v", in)
	}
	if in.Meta["jobId"] != j.ID || in.Meta["jobName"] != "standup" || in.Meta["schedule"] != "0 9 * * *" {
		t.Fatalf("meta %v", in.Meta)
	}
	if len(e.out.deliveries()) != 0 || len(e.bg.runs()) != 0 {
		t.Fatal("in-chat run delivered through the background path")
	}
	rs := e.runs(j.ID)
	if len(rs) != 1 {
		t.Fatalf("runs %+v", rs)
	}
	r := rs[0]
	if r.SessionKey != sessionkey.ForConversation("main", chat) {
		t.Fatalf("run in %s, want the chat's session", r.SessionKey)
	}
	if r.Status != scheduler.StatusOK || r.Delivery.Status != scheduler.DeliveryDelivered ||
		strings.Join(r.Delivery.MessageIDs, ",") != "trigger-1,reply-1" || !r.ScheduledAt.Equal(utc(2026, 3, 2, 9, 0)) || r.Late {
		t.Fatalf("run %+v", r)
	}
	if got := e.job(j.ID).State.NextRunAt; !got.Equal(utc(2026, 3, 3, 9, 0)) {
		t.Fatalf("next %v", got)
	}
}

func TestInChatFailureIsNotDelivered(t *testing.T) {
	e := newEnv(t)
	e.chat.err = errors.New("channel deleted")
	j := e.add(scheduler.AddRequest{Schedule: "0 9 * * *", Target: "main"})
	e.clk.Set(utc(2026, 3, 2, 9, 0))
	e.tick()
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusError || r.Delivery.Status != scheduler.DeliveryFailed || !strings.Contains(r.Delivery.Error, "channel deleted") {
		t.Fatalf("run %+v", r)
	}
}

func TestBackgroundDeliversOnlyTheResult(t *testing.T) {
	tests := []struct {
		name, target, to string
		wantTarget       string
		wantSeed         bool
	}{
		{"isolated to channel", "isolated", otherChannel, "200", false},
		{"isolated default to creating chat", "isolated", "", "100", false},
		{"current seeded", "current", otherChannel, "200", true},
		{"session elsewhere", "session:" + sessionkey.ForConversation("main", chat), otherChannel, "200", false},
		{"implicit isolated when to is elsewhere", "", "user:42", "user:42", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			key := sessionkey.ForConversation("main", chat)
			e.hist.entries[key] = []transcript.Entry{{Seq: 1, Role: transcript.RoleUser, Text: "we ship friday"}}
			j := e.add(scheduler.AddRequest{Name: "digest", Schedule: "every 10m", Prompt: "digest", Target: tc.target, To: tc.to, AgentID: "main"})
			if j.Mode() != scheduler.ModeBackground {
				t.Fatalf("mode %s", j.Mode())
			}
			e.clk.Advance(10*time.Minute + time.Second)
			e.tick()
			if len(e.chat.runs()) != 0 {
				t.Fatal("background job ran a chat turn")
			}
			bg := e.bg.runs()
			if len(bg) != 1 {
				t.Fatalf("%d background runs", len(bg))
			}
			rs := e.runs(j.ID)
			r := rs[0]
			if bg[0].SessionKey != sessionkey.CronRun("main", j.ID, r.RunID) || bg[0].Prompt != "digest" {
				t.Fatalf("background run %+v", bg[0])
			}
			if tc.wantSeed != (len(bg[0].Seed) == 1 && bg[0].Seed[0].Text == "we ship friday") {
				t.Fatalf("seed %+v", bg[0].Seed)
			}
			ds := e.out.deliveries()
			if len(ds) != 1 {
				t.Fatalf("%d deliveries", len(ds))
			}
			d := ds[0]
			if d.ID != "job:"+j.ID+":run:"+r.RunID || d.Text != "the result" || d.Target.ConversationID != tc.wantTarget ||
				d.Producer.Source != transcript.SourceJob || d.Producer.AgentID != "main" || d.Producer.TurnSessionKey != "" {
				t.Fatalf("delivery %+v", d)
			}
			if d.Producer.Meta["jobId"] != j.ID || d.Producer.Meta["jobName"] != "digest" || d.Producer.Meta["schedule"] != "every 10m" {
				t.Fatalf("meta %v", d.Producer.Meta)
			}
			if r.Status != scheduler.StatusOK || r.Delivery.Status != scheduler.DeliveryDelivered || r.Delivery.MessageIDs[0] != "msg-1" {
				t.Fatalf("run %+v", r)
			}
		})
	}
}

func TestBackgroundDeliveryFailureIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.out.setFail(delivery.ErrDestinationGone)
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "isolated", To: otherChannel})
	e.clk.Advance(10 * time.Minute)
	e.tick()
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusError || r.Delivery.Status != scheduler.DeliveryFailed ||
		!strings.Contains(r.Delivery.Error, "destination gone") || len(r.Delivery.MessageIDs) != 0 {
		t.Fatalf("run %+v", r)
	}
}

func TestBackgroundEmptyResultNotRequested(t *testing.T) {
	for _, res := range []string{"", "  ", "NO_REPLY"} {
		e := newEnv(t)
		e.bg.result = res
		j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "isolated"})
		e.clk.Advance(10 * time.Minute)
		e.tick()
		r := e.runs(j.ID)[0]
		if r.Status != scheduler.StatusOK || r.Delivery.Status != scheduler.DeliveryNotRequested || len(e.out.deliveries()) != 0 {
			t.Fatalf("%q: run %+v", res, r)
		}
	}
}

func TestCatchUpOnceLate(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "hourly", Schedule: "0 * * * *", Prompt: "check", Target: "main"})
	bg := e.add(scheduler.AddRequest{Name: "bg", Schedule: "0 * * * *", Prompt: "check", Target: "isolated"})
	// The bot is down from 08:59 until 12:30: 09:00, 10:00, 11:00, 12:00 are missed.
	e.clk.Set(utc(2026, 3, 2, 12, 30))
	e.s = e.newScheduler() // restart
	e.tick()
	e.tick()
	calls := e.chat.runs()
	if len(calls) != 1 {
		t.Fatalf("%d runs after downtime, want 1", len(calls))
	}
	if !calls[0].Late || calls[0].LateBy != 30*time.Minute || calls[0].Trigger != "⏰ hourly (late by 30m): check" || calls[0].Meta["late"] != "30m" {
		t.Fatalf("run %+v", calls[0])
	}
	rs := e.runs(j.ID)
	if len(rs) != 2 {
		t.Fatalf("runs %+v", rs)
	}
	var ran, skipped scheduler.Run
	for _, r := range rs {
		if r.Status == scheduler.StatusSkipped {
			skipped = r
		} else {
			ran = r
		}
	}
	if !ran.Late || ran.Trigger != scheduler.TriggerCatchUp || !ran.ScheduledAt.Equal(utc(2026, 3, 2, 12, 0)) || ran.Missed != 3 {
		t.Fatalf("late run %+v", ran)
	}
	if skipped.Missed != 2 || !skipped.ScheduledAt.Equal(utc(2026, 3, 2, 11, 0)) {
		t.Fatalf("skipped record %+v", skipped)
	}
	if got := e.job(j.ID).State.NextRunAt; !got.Equal(utc(2026, 3, 2, 13, 0)) {
		t.Fatalf("next %v", got)
	}
	// The background result says it is late.
	ds := e.out.deliveries()
	if len(ds) != 1 || !strings.HasPrefix(ds[0].Text, "⏰ bg (late by 30m)\n") {
		t.Fatalf("deliveries %+v", ds)
	}
	_ = bg
}

func TestCatchUpOff(t *testing.T) {
	e := newEnv(t, func(c *scheduler.Settings) { c.CatchUpMissed = false })
	j := e.add(scheduler.AddRequest{Schedule: "0 * * * *", Target: "main"})
	e.clk.Set(utc(2026, 3, 2, 12, 30))
	e.s = e.newScheduler()
	e.tick()
	if len(e.chat.runs()) != 0 {
		t.Fatal("missed run caught up with catchUpMissed off")
	}
	rs := e.runs(j.ID)
	if len(rs) != 1 || rs[0].Status != scheduler.StatusSkipped || !strings.Contains(rs[0].Error, "catchUpMissed is off") || rs[0].Missed != 3 {
		t.Fatalf("runs %+v", rs)
	}
	if got := e.job(j.ID).State.NextRunAt; !got.Equal(utc(2026, 3, 2, 13, 0)) {
		t.Fatalf("next %v", got)
	}
	e.clk.Set(utc(2026, 3, 2, 13, 0))
	e.tick()
	if len(e.chat.runs()) != 1 {
		t.Fatal("next on-time run did not happen")
	}
}

func TestLedgerPreventsSecondRunOfAnInstant(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Schedule: "0 9 * * *", Target: "main"})
	e.clk.Set(utc(2026, 3, 2, 9, 0))
	// A previous process claimed 09:00 and crashed before saving the job's state.
	if ok, _ := e.store.ClaimInstant(ctx, j.ID, utc(2026, 3, 2, 9, 0)); !ok {
		t.Fatal("claim")
	}
	e.s = e.newScheduler()
	e.tick()
	if len(e.chat.runs()) != 0 {
		t.Fatal("instant ran twice")
	}
	if got := e.job(j.ID).State.NextRunAt; !got.Equal(utc(2026, 3, 3, 9, 0)) {
		t.Fatalf("next %v", got)
	}
}

func TestBackoffAndAutoDisable(t *testing.T) {
	e := newEnv(t, func(c *scheduler.Settings) { c.FailureAlert.After = 0 })
	e.bg.err = errBoom
	j := e.add(scheduler.AddRequest{Name: "flaky", Schedule: "every 1m", Target: "isolated"})
	wantGap := []time.Duration{time.Minute, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour}
	for i := range scheduler.AutoDisableAfter {
		next := e.job(j.ID).State.NextRunAt
		e.clk.Set(next)
		e.tick()
		st := e.job(j.ID).State
		if st.ConsecutiveFailures != i+1 {
			t.Fatalf("failures %d after run %d", st.ConsecutiveFailures, i+1)
		}
		if i < len(wantGap) {
			if gap := st.NextRunAt.Sub(next); gap != wantGap[i] {
				t.Fatalf("after failure %d next run in %v, want %v", i+1, gap, wantGap[i])
			}
		}
	}
	jj := e.job(j.ID)
	if jj.Enabled || jj.State.DisabledReason != scheduler.DisabledFailures {
		t.Fatalf("not disabled: %+v", jj)
	}
	ds := e.out.deliveries()
	if len(ds) != 1 || ds[0].Producer.Source != transcript.SourceAlert || !strings.Contains(ds[0].Text, "turned off") ||
		!strings.HasPrefix(ds[0].ID, "job:"+j.ID+":disabled:") {
		t.Fatalf("notice %+v", ds)
	}
	e.clk.Advance(24 * time.Hour)
	e.tick()
	if n := len(e.bg.runs()); n != scheduler.AutoDisableAfter {
		t.Fatalf("disabled job ran: %d runs", n)
	}
	// Success resets the counter.
	e2 := newEnv(t)
	e2.bg.err = errBoom
	j2 := e2.add(scheduler.AddRequest{Schedule: "every 1m", Target: "isolated"})
	e2.clk.Set(e2.job(j2.ID).State.NextRunAt)
	e2.tick()
	e2.bg.err = nil
	e2.clk.Set(e2.job(j2.ID).State.NextRunAt)
	e2.tick()
	if st := e2.job(j2.ID).State; st.ConsecutiveFailures != 0 || st.LastStatus != scheduler.StatusOK {
		t.Fatalf("state %+v", st)
	}
}

func TestFailureAlertThresholdAndCooldown(t *testing.T) {
	e := newEnv(t) // after 2, cooldown 1h
	e.chat.err = &model.Error{Kind: model.KindTimeout, Provider: "openai", Err: errors.New("dial tcp 10.1.2.3:443: i/o timeout")}
	j := e.add(scheduler.AddRequest{Name: "news", Schedule: "every 10m", Target: "main"})
	alerts := func() []delivery.Delivery {
		var out []delivery.Delivery
		for _, d := range e.out.deliveries() {
			if d.Producer.Source == transcript.SourceAlert {
				out = append(out, d)
			}
		}
		return out
	}
	step := func() {
		e.clk.Set(e.job(j.ID).State.NextRunAt)
		e.tick()
	}
	step()
	if len(alerts()) != 0 {
		t.Fatal("alert after 1 failure")
	}
	step()
	as := alerts()
	if len(as) != 1 {
		t.Fatalf("%d alerts after 2 failures", len(as))
	}
	r := e.runs(j.ID)[0]
	if as[0].ID != "job:"+j.ID+":alert:"+r.RunID || as[0].Target.ConversationID != "100" ||
		!strings.Contains(as[0].Text, "failed 2 times") || as[0].Producer.Meta["jobId"] != j.ID {
		t.Fatalf("alert %+v", as[0])
	}
	// The alert names the kind of failure; the error text stays in the run.
	if !strings.Contains(as[0].Text, "model error (timeout)") || strings.Contains(as[0].Text, "dial tcp") || strings.Contains(as[0].Text, "10.1.2.3") {
		t.Fatalf("alert text %q", as[0].Text)
	}
	if !strings.Contains(r.Error, "dial tcp 10.1.2.3:443") || r.Summary != "model error (timeout)" {
		t.Fatalf("run keeps error %q summary %q", r.Error, r.Summary)
	}
	step() // within cooldown
	step()
	if len(alerts()) != 1 {
		t.Fatalf("alert within cooldown: %d", len(alerts()))
	}
	// Past the cooldown the next failure alerts again.
	e.clk.Set(e.job(j.ID).State.LastAlertAt.Add(time.Hour))
	e.tick()
	for len(alerts()) == 1 && e.job(j.ID).Enabled {
		step()
	}
	if len(alerts()) != 2 {
		t.Fatalf("%d alerts after cooldown", len(alerts()))
	}
}

func TestAlertDeliveryFailureRetriesNextTime(t *testing.T) {
	e := newEnv(t)
	e.chat.err = errBoom
	e.out.setFail(delivery.ErrForbidden)
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "main"})
	for range 2 {
		e.clk.Set(e.job(j.ID).State.NextRunAt)
		e.tick()
	}
	if !e.job(j.ID).State.LastAlertAt.IsZero() {
		t.Fatal("undelivered alert counted as sent")
	}
	e.out.setFail(nil)
	e.clk.Set(e.job(j.ID).State.NextRunAt)
	e.tick()
	if e.job(j.ID).State.LastAlertAt.IsZero() || len(e.out.deliveries()) != 1 {
		t.Fatalf("alert not retried: %+v", e.out.deliveries())
	}
}

func TestAtJobRunsOnce(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Schedule: "at 2026-03-02T10:00:00Z", Target: "main"})
	e.clk.Set(utc(2026, 3, 2, 10, 0))
	e.tick()
	e.clk.Advance(48 * time.Hour)
	e.tick()
	if len(e.chat.runs()) != 1 {
		t.Fatalf("%d runs", len(e.chat.runs()))
	}
	jj := e.job(j.ID)
	if jj.Enabled || jj.State.DisabledReason != scheduler.DisabledCompleted || !jj.State.NextRunAt.IsZero() {
		t.Fatalf("%+v", jj)
	}
	if !strings.Contains(scheduler.Describe(jj, time.UTC), "done") {
		t.Fatal(scheduler.Describe(jj, time.UTC))
	}
}

func TestPanicRecovered(t *testing.T) {
	e := newEnv(t)
	e.chat.panic = true
	j := e.add(scheduler.AddRequest{Schedule: "every 1m", Target: "main"})
	e.clk.Advance(time.Minute)
	e.tick()
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusError || !strings.Contains(r.Error, "panic: runner exploded") {
		t.Fatalf("run %+v", r)
	}
}

func TestOneRunAtATimePerJob(t *testing.T) {
	e := newEnv(t)
	e.chat.block, e.chat.start = make(chan struct{}), make(chan struct{}, 1)
	j := e.add(scheduler.AddRequest{Schedule: "every 1m", Target: "main"})
	e.clk.Advance(time.Minute)
	done := make(chan error)
	go func() { done <- e.s.RunDue(ctx) }()
	<-e.chat.start
	if _, err := e.s.RunNow(ctx, j.ID); !errors.Is(err, scheduler.ErrBusy) {
		t.Fatalf("RunNow while running: %v", err)
	}
	if err := e.s.RunDue(ctx); err != nil { // skips the running job
		t.Fatal(err)
	}
	close(e.chat.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(e.chat.runs()); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

func TestRunNowAndAPI(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "n", Schedule: "0 9 * * *", Target: "main"})
	r, err := e.s.RunNow(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Trigger != scheduler.TriggerManual || r.Status != scheduler.StatusOK || !r.ScheduledAt.IsZero() {
		t.Fatalf("run %+v", r)
	}
	if got := e.job(j.ID).State.NextRunAt; !got.Equal(utc(2026, 3, 2, 9, 0)) {
		t.Fatalf("manual run moved the schedule: %v", got)
	}
	rs, err := e.s.Runs(ctx, j.ID, 10)
	if err != nil || len(rs) != 1 {
		t.Fatalf("Runs %v %v", rs, err)
	}
	list, _ := e.s.List(ctx)
	if len(list) != 1 {
		t.Fatalf("list %v", list)
	}
	if err := e.s.Remove(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	var ue *scheduler.UserError
	for _, err := range []error{e.s.Remove(ctx, j.ID), func() error { _, err := e.s.RunNow(ctx, j.ID); return err }(),
		func() error { _, err := e.s.Runs(ctx, j.ID, 1); return err }()} {
		if !errors.Is(err, scheduler.ErrNotFound) || !errors.As(err, &ue) || ue.Hint != scheduler.HintListJobs {
			t.Fatalf("unknown job: %v", err)
		}
	}
	if rs, _ := e.store.Runs(ctx, j.ID, 0); len(rs) != 0 {
		t.Fatal("runs survive remove")
	}
}

func TestRunRetention(t *testing.T) {
	e := newEnv(t, func(c *scheduler.Settings) { c.RunRetention = 3 })
	j := e.add(scheduler.AddRequest{Schedule: "every 1m", Target: "main"})
	for range 6 {
		e.clk.Set(e.job(j.ID).State.NextRunAt)
		e.tick()
	}
	if rs := e.runs(j.ID); len(rs) != 3 || !rs[0].ScheduledAt.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("runs %+v", rs)
	}
}

func TestRunLoopCatchesUpAtStartAndStops(t *testing.T) {
	e := newEnv(t)
	e.chat.start = make(chan struct{}, 1)
	e.add(scheduler.AddRequest{Schedule: "0 * * * *", Target: "main"})
	e.clk.Set(utc(2026, 3, 2, 12, 30))
	s := e.newScheduler()
	c, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(c) }()
	<-e.chat.start // the catch-up run happened at start
	// Adding while running registers a trigger entry.
	if _, err := s.Add(ctx, scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "main", CreatedIn: chat}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(e.chat.runs()); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// TestAddWhileTriggerStarts: adding jobs while cron's loop starts (and asks
// every job's trigger for its next run) must not deadlock: the trigger
// never waits for the lock Add holds while handing cron the new entry.
func TestAddWhileTriggerStarts(t *testing.T) {
	e := newEnv(t)
	for range 30 {
		e.add(scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "main", CreatedIn: chat})
	}
	s := e.s
	for round := range 3 {
		c, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- s.Run(c) }()
		added := make(chan error)
		go func() {
			for range 300 {
				if _, err := s.Add(ctx, scheduler.AddRequest{Schedule: "every 1h", Prompt: "y", Target: "main", CreatedIn: chat}); err != nil {
					added <- err
					return
				}
			}
			added <- nil
		}()
		select {
		case err := <-added:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Add deadlocked against the starting trigger", round)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Run did not stop", round)
		}
	}
}
