package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
)

// crashDuringRun starts the job's due run on a first scheduler and leaves
// it inside the model call: the store then holds what a SIGKILL at that
// moment leaves (the instant claimed, the run `running`). The returned
// function lets the abandoned goroutine end (test cleanup only).
func crashDuringRun(t *testing.T, e *env, jobID string) (release func()) {
	t.Helper()
	e.chat.block, e.chat.start = make(chan struct{}), make(chan struct{}, 1)
	e.clk.Set(e.job(jobID).State.NextRunAt)
	first := e.newScheduler()
	ended := make(chan struct{})
	go func() { defer close(ended); _ = first.RunDue(context.Background()) }()
	<-e.chat.start
	if rs := e.runs(jobID); len(rs) != 1 || rs[0].Status != scheduler.StatusRunning {
		t.Fatalf("before the crash: runs %+v", rs)
	}
	block := e.chat.block
	e.chat.mu.Lock()
	e.chat.block, e.chat.start = nil, nil
	e.chat.mu.Unlock()
	return func() { close(block); <-ended }
}

// restart runs a new scheduler over the same store until want deliveries
// were confirmed (or fails after a generous bound), then stops it.
func restart(t *testing.T, e *env, want int) []delivery.Delivery {
	t.Helper()
	e.out.done = make(chan delivery.Delivery, 16)
	s := e.newScheduler()
	c, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(c) }()
	var got []delivery.Delivery
	for len(got) < want {
		select {
		case d := <-e.out.done:
			got = append(got, d)
		case <-time.After(10 * time.Second):
			cancel()
			<-done
			t.Fatalf("after the restart: %d of %d deliveries; runs %+v", len(got), want, e.runs(e.chat.runs()[0].JobID))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCrashDuringInChatRunEndsVisibly: a kill during an in-chat job's model
// call (trigger shown, no reply) must not leave the run `running` forever
// with its instant skipped: after the restart the run failed (counted for
// alerts), the chat got a notice, and the instant is not run a second time.
func TestCrashDuringInChatRunEndsVisibly(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "standup", Schedule: "0 9 * * *", Prompt: "ask for updates", Target: "main"})
	release := crashDuringRun(t, e, j.ID)
	runID := e.runs(j.ID)[0].RunID
	// The trigger was displayed before the kill.
	if err := e.store.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "job:" + j.ID + ":run:" + runID + ":trigger", Target: chat, Text: "⏰ standup: ask for updates"},
		State: delivery.StateDelivered, MessageIDs: []string{"m-trigger"}}); err != nil {
		t.Fatal(err)
	}
	got := restart(t, e, 1)
	defer release()

	n := got[0]
	if n.ID != "job:"+j.ID+":interrupted:"+runID || n.Target.ConversationID != chat.ConversationID || n.Producer.Source != transcript.SourceNotice ||
		!strings.Contains(n.Text, "interrupted") || !strings.Contains(n.Text, "standup") {
		t.Fatalf("notice %+v", n)
	}
	rs := e.runs(j.ID)
	if len(rs) != 1 {
		t.Fatalf("runs %+v", rs)
	}
	r := rs[0]
	if r.Status != scheduler.StatusError || r.Summary != scheduler.SummaryInterrupted || r.FinishedAt.IsZero() ||
		r.Delivery.Status != scheduler.DeliveryDelivered || strings.Join(r.Delivery.MessageIDs, ",") != "m-trigger,msg-1" {
		t.Fatalf("interrupted run %+v", r)
	}
	st := e.job(j.ID).State
	if st.ConsecutiveFailures != 1 || st.LastStatus != scheduler.StatusError || !st.NextRunAt.After(e.clk.Now()) {
		t.Fatalf("job state %+v", st)
	}
	if n := len(e.chat.runs()); n != 1 {
		t.Fatalf("the interrupted instant ran %d times", n)
	}
}

// TestCrashAfterReplyRecordsTheRun: killed after the reply was confirmed
// but before the run was recorded: the run is recorded as delivered with
// the displayed ids, and nothing else is posted.
func TestCrashAfterReplyRecordsTheRun(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Schedule: "0 9 * * *", Target: "main"})
	release := crashDuringRun(t, e, j.ID)
	defer release()
	runID := e.runs(j.ID)[0].RunID
	for id, mid := range map[string]string{":trigger": "m-trigger", "": "m-reply"} {
		if err := e.store.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "job:" + j.ID + ":run:" + runID + id, Target: chat, Text: "x",
			Producer: delivery.Producer{Source: transcript.SourceTurn}}, State: delivery.StateDelivered, MessageIDs: []string{mid}}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.newScheduler().RecoverInterrupted(ctx)
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusOK || r.Delivery.Status != scheduler.DeliveryDelivered || strings.Join(r.Delivery.MessageIDs, ",") != "m-trigger,m-reply" {
		t.Fatalf("run %+v", r)
	}
	if len(e.out.deliveries()) != 0 || e.job(j.ID).State.ConsecutiveFailures != 0 {
		t.Fatalf("posted %+v after a run that had finished", e.out.deliveries())
	}
}

// TestCrashDuringBackgroundRunEndsVisibly: the store as a kill during a
// background run leaves it (instant claimed, run `running`, no result
// delivery): the restart records the failure and tells the delivery target.
func TestCrashDuringBackgroundRunEndsVisibly(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "report", Schedule: "every 10m", Target: "isolated", To: otherChannel})
	at := e.job(j.ID).State.NextRunAt
	e.clk.Set(at.Add(time.Second))
	if ok, err := e.store.ClaimInstant(ctx, j.ID, at); err != nil || !ok {
		t.Fatalf("claim %v %v", ok, err)
	}
	run := scheduler.Run{JobID: j.ID, RunID: "20260302T090000Z", Trigger: scheduler.TriggerSchedule, ScheduledAt: at, StartedAt: at,
		Status: scheduler.StatusRunning, Delivery: scheduler.RunDelivery{Status: scheduler.DeliveryNotRequested, MessageIDs: []string{}}}
	if err := e.store.PutRun(ctx, run, 50); err != nil {
		t.Fatal(err)
	}
	n, err := e.newScheduler().RecoverInterrupted(ctx)
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	ds := e.out.deliveries()
	if len(ds) != 1 || ds[0].Target.ConversationID != "200" || !strings.Contains(ds[0].Text, "interrupted") {
		t.Fatalf("deliveries %+v", ds)
	}
	r := e.runs(j.ID)[0]
	if r.Status != scheduler.StatusError || r.Summary != scheduler.SummaryInterrupted || r.Delivery.Target != otherChannel {
		t.Fatalf("run %+v", r)
	}
	if e.job(j.ID).State.ConsecutiveFailures != 1 || !e.job(j.ID).State.NextRunAt.After(at) {
		t.Fatalf("job %+v", e.job(j.ID).State)
	}
	// The restarted scheduler's trigger pass does not run the claimed instant again.
	e.tick()
	if len(e.bg.runs()) != 0 {
		t.Fatalf("the interrupted instant ran again: %+v", e.bg.runs())
	}
}
