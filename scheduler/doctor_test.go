package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/memory"
)

// oldJob is a job as an older version stored it.
func oldJob(id, target, to string, mode scheduler.Mode) scheduler.Job {
	return scheduler.Job{
		ID: id, Name: "old " + id, AgentID: "main", Prompt: "p", Target: target, To: to, StoredMode: mode,
		Schedule:  scheduler.ScheduleSpec{Kind: scheduler.KindEvery, Every: time.Hour, Anchor: t0, TZ: "UTC", Text: "every 1h"},
		CreatedIn: chat, CreatedAt: t0, Enabled: true, State: scheduler.JobState{NextRunAt: t0.Add(time.Hour)},
	}
}

func TestDoctorMigratesOldStyleJobs(t *testing.T) {
	st := memory.New()
	key := sessionkey.ForConversation("main", binding.ConversationRef{Channel: "discord", ConversationID: "300"})
	seed := []scheduler.Job{
		oldJob("a-session-elsewhere", "session:"+key, otherChannel, scheduler.ModeInChat),
		oldJob("b-main-elsewhere", "main", otherChannel, scheduler.ModeInChat),
		oldJob("c-no-mode", "isolated", otherChannel, ""),
		oldJob("d-healthy-inchat", "main", "", scheduler.ModeInChat),
		oldJob("e-healthy-session", "session:"+key, "channel:300", scheduler.ModeInChat),
		oldJob("f-current-marked-inchat", "current", otherChannel, scheduler.ModeInChat),
	}
	bad := oldJob("g-bad-schedule", "main", "", scheduler.ModeInChat)
	bad.Schedule = scheduler.ScheduleSpec{Kind: scheduler.KindCron, Expr: "99 * * * *", TZ: "UTC", Text: "99 * * * *"}
	seed = append(seed, bad)
	for _, j := range seed {
		if err := st.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := scheduler.Diagnose(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]scheduler.Finding{}
	for _, f := range fs {
		byID[f.JobID] = f
	}
	if len(fs) != 5 {
		t.Fatalf("findings %+v", fs)
	}
	if f := byID["a-session-elsewhere"]; !strings.Contains(f.Warning, "no longer sees "+key+"'s history") || f.Fix == "" || f.Fixed {
		t.Fatalf("a: %+v", f)
	}
	if _, ok := byID["d-healthy-inchat"]; ok {
		t.Fatal("healthy job reported")
	}
	if f := byID["g-bad-schedule"]; f.Fix != "" || !strings.Contains(f.Problem, "cannot be read") {
		t.Fatalf("g: %+v", f)
	}
	// Diagnose changed nothing.
	if j, _, _ := st.Job(ctx, "a-session-elsewhere"); j.StoredMode != scheduler.ModeInChat {
		t.Fatal("Diagnose wrote")
	}

	fixed, err := scheduler.Fix(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fixed {
		if f.Fixed {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("fixed %d: %+v", n, fixed)
	}
	want := map[string]struct {
		target string
		mode   scheduler.Mode
	}{
		"a-session-elsewhere":     {"session:" + key, scheduler.ModeBackground},
		"b-main-elsewhere":        {"isolated", scheduler.ModeBackground},
		"c-no-mode":               {"isolated", scheduler.ModeBackground},
		"e-healthy-session":       {"session:" + key, scheduler.ModeInChat},
		"f-current-marked-inchat": {"current", scheduler.ModeBackground}, // current is preserved
	}
	for id, w := range want {
		j, _, _ := st.Job(ctx, id)
		if j.Target != w.target || j.StoredMode != w.mode {
			t.Errorf("%s: target %q mode %q, want %q %q", id, j.Target, j.StoredMode, w.target, w.mode)
		}
	}
	// Fixed jobs now run in the background with their own session.
	e := newEnv(t)
	e.store = st
	e.s = e.newScheduler()
	e.clk.Set(t0.Add(time.Hour))
	if err := e.s.RunDue(ctx); err == nil || !strings.Contains(err.Error(), "g-bad-schedule") {
		t.Fatalf("RunDue: %v (the unreadable job is reported, the others run)", err)
	}
	for _, r := range e.bg.runs() {
		if sessionkey.KindOf(r.SessionKey) != sessionkey.KindJobRun {
			t.Fatalf("background run in %s", r.SessionKey)
		}
	}
	if len(e.bg.runs()) != 4 {
		t.Fatalf("%d background runs", len(e.bg.runs()))
	}
	for _, c := range e.chat.runs() {
		if c.Conversation.ConversationID == "200" {
			t.Fatalf("in-chat run delivering elsewhere after fix: %+v", c)
		}
	}
	// A second pass finds only what needs a person.
	again, _ := scheduler.Diagnose(ctx, st)
	if len(again) != 1 || again[0].JobID != "g-bad-schedule" {
		t.Fatalf("after fix: %+v", again)
	}
}
