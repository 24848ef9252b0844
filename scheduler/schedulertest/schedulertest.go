// Package schedulertest is the conformance suite for scheduler.Store.
package schedulertest

import (
	"fmt"
	"github.com/agentbot/agentbot/internal/storetest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
)

// Option configures Run.
type Option = storetest.Option[scheduler.Store]

type harness = storetest.Harness[scheduler.Store]

// WithReopen supplies a hook that closes s and returns a store over the same
// persisted data. Without it, durability tests are skipped.
func WithReopen(fn func(t *testing.T, s scheduler.Store) scheduler.Store) Option {
	return storetest.WithReopen(fn)
}

// Run runs the scheduler.Store conformance suite. open must return a new,
// empty store for each call and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) scheduler.Store, opts ...Option) {
	t.Helper()
	storetest.Run(t, open, opts, []storetest.Case[scheduler.Store]{
		{Name: "PutGetJob", Fn: testPutGet},
		{Name: "JobsOrderedByID", Fn: testJobsOrder},
		{Name: "ReplaceJob", Fn: testReplace},
		{Name: "DeleteJob", Fn: testDelete},
		{Name: "EmptyIDRejected", Fn: testEmptyID},
		{Name: "RunsNewestFirst", Fn: testRunsOrder},
		{Name: "RunReplace", Fn: testRunReplace},
		{Name: "RunRetention", Fn: testRetention},
		{Name: "RunsPerJob", Fn: testRunsPerJob},
		{Name: "ClaimOnce", Fn: testClaimOnce},
		{Name: "ClaimHighWaterMark", Fn: testClaimMonotonic},
		{Name: "ClaimConcurrent", Fn: testClaimConcurrent},
		{Name: "CopySemantics", Fn: testCopies},
		{Name: "Durable", Fn: testDurable},
	})
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// SampleJob returns a fully populated job for tests.
func SampleJob(id string) scheduler.Job {
	return scheduler.Job{
		ID: id, Name: "standup " + id, AgentID: "main",
		Schedule: scheduler.ScheduleSpec{Kind: scheduler.KindCron, Expr: "30 9 * * 1-5", TZ: "Europe/Berlin", Text: "30 9 * * 1-5"},
		Prompt:   "summarise", Target: "current", To: "channel:42", StoredMode: scheduler.ModeBackground,
		Seed: []transcript.Entry{{Seq: 1, SessionKey: "agent:main:discord:channel:7", Role: transcript.RoleUser,
			Text: "hi", MessageIDs: []string{"m1"}, Source: transcript.SourceUser, At: t0}},
		CreatedBy: "u1", CreatedIn: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "7"},
		CreatedAt: t0, Enabled: true,
		State: scheduler.JobState{NextRunAt: t0.Add(time.Hour), ConsecutiveFailures: 2, LastStatus: scheduler.StatusError,
			LastError: "boom", LastAlertAt: t0},
	}
}

func sampleRun(job, id string, started time.Time) scheduler.Run {
	return scheduler.Run{
		JobID: job, RunID: id, Trigger: scheduler.TriggerSchedule, ScheduledAt: started, StartedAt: started,
		FinishedAt: started.Add(time.Second), Status: scheduler.StatusOK, Late: true, LateBy: 3 * time.Hour, Missed: 2,
		SessionKey: sessionkey.CronRun("main", job, id),
		Delivery:   scheduler.RunDelivery{Status: scheduler.DeliveryDelivered, MessageIDs: []string{"1", "2"}, Target: "channel:42"},
	}
}

func equalJob(t *testing.T, got, want scheduler.Job) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.State.NextRunAt.Equal(want.State.NextRunAt) {
		t.Fatalf("times differ: got %v/%v want %v/%v", got.CreatedAt, got.State.NextRunAt, want.CreatedAt, want.State.NextRunAt)
	}
	norm := func(j scheduler.Job) scheduler.Job {
		j.CreatedAt, j.State.NextRunAt, j.State.LastAlertAt, j.State.LastRunAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		j.Schedule.Anchor, j.Schedule.At = time.Time{}, time.Time{}
		for i := range j.Seed {
			j.Seed[i].At = time.Time{}
		}
		return j
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("job differs:\n got %+v\nwant %+v", g, w)
	}
}

func testPutGet(t *testing.T, h *harness) {
	s := h.Open(t)
	want := SampleJob("j1")
	if err := s.PutJob(h.Ctx, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Job(h.Ctx, "j1")
	if err != nil || !ok {
		t.Fatalf("Job: ok=%v err=%v", ok, err)
	}
	equalJob(t, got, want)
	if _, ok, err := s.Job(h.Ctx, "nope"); ok || err != nil {
		t.Fatalf("unknown job: ok=%v err=%v", ok, err)
	}
}

func testJobsOrder(t *testing.T, h *harness) {
	s := h.Open(t)
	if js, err := s.Jobs(h.Ctx); err != nil || len(js) != 0 {
		t.Fatalf("empty store: %v %v", js, err)
	}
	for _, id := range []string{"c", "a", "b"} {
		if err := s.PutJob(h.Ctx, SampleJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	js, err := s.Jobs(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c"}) {
		t.Fatalf("order %v", ids)
	}
}

func testReplace(t *testing.T, h *harness) {
	s := h.Open(t)
	j := SampleJob("j1")
	_ = s.PutJob(h.Ctx, j)
	j.Enabled, j.State.DisabledReason = false, scheduler.DisabledFailures
	if err := s.PutJob(h.Ctx, j); err != nil {
		t.Fatal(err)
	}
	got, _, _ := s.Job(h.Ctx, "j1")
	if got.Enabled || got.State.DisabledReason != scheduler.DisabledFailures {
		t.Fatalf("not replaced: %+v", got.State)
	}
	if js, _ := s.Jobs(h.Ctx); len(js) != 1 {
		t.Fatalf("%d jobs after replace", len(js))
	}
}

func testDelete(t *testing.T, h *harness) {
	s := h.Open(t)
	_ = s.PutJob(h.Ctx, SampleJob("j1"))
	_ = s.PutJob(h.Ctx, SampleJob("j2"))
	_ = s.PutRun(h.Ctx, sampleRun("j1", "r1", t0), 0)
	_ = s.PutRun(h.Ctx, sampleRun("j2", "r1", t0), 0)
	if ok, _ := s.ClaimInstant(h.Ctx, "j1", t0); !ok {
		t.Fatal("first claim refused")
	}
	if err := s.DeleteJob(h.Ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Job(h.Ctx, "j1"); ok {
		t.Fatal("job still there")
	}
	if rs, _ := s.Runs(h.Ctx, "j1", 0); len(rs) != 0 {
		t.Fatalf("runs survive delete: %v", rs)
	}
	if rs, _ := s.Runs(h.Ctx, "j2", 0); len(rs) != 1 {
		t.Fatalf("other job's runs lost: %v", rs)
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "j1", t0); !ok {
		t.Fatal("ledger survives delete")
	}
	if err := s.DeleteJob(h.Ctx, "unknown"); err != nil {
		t.Fatalf("delete unknown: %v", err)
	}
}

func testEmptyID(t *testing.T, h *harness) {
	s := h.Open(t)
	if err := s.PutJob(h.Ctx, SampleJob("")); err == nil {
		t.Fatal("job with empty id stored")
	}
	if err := s.PutRun(h.Ctx, sampleRun("", "r", t0), 0); err == nil {
		t.Fatal("run with empty job id stored")
	}
	if err := s.PutRun(h.Ctx, sampleRun("j", "", t0), 0); err == nil {
		t.Fatal("run with empty run id stored")
	}
}

func runIDs(rs []scheduler.Run) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.RunID)
	}
	return out
}

func testRunsOrder(t *testing.T, h *harness) {
	s := h.Open(t)
	// r3 ties with r2 on StartedAt: the higher run id comes first.
	starts := map[string]time.Time{"r0": t0, "r1": t0.Add(time.Minute), "r2": t0.Add(2 * time.Minute), "r3": t0.Add(2 * time.Minute)}
	for _, id := range []string{"r2", "r0", "r3", "r1"} {
		if err := s.PutRun(h.Ctx, sampleRun("j", id, starts[id]), 0); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Runs(h.Ctx, "j", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(rs); !reflect.DeepEqual(got, []string{"r3", "r2", "r1", "r0"}) {
		t.Fatalf("order %v", got)
	}
	rs, _ = s.Runs(h.Ctx, "j", 2)
	if got := runIDs(rs); !reflect.DeepEqual(got, []string{"r3", "r2"}) {
		t.Fatalf("limit: %v", got)
	}
	want := sampleRun("j", "r0", t0)
	rs, _ = s.Runs(h.Ctx, "j", 0)
	got := rs[3]
	if !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) || !got.ScheduledAt.Equal(want.ScheduledAt) {
		t.Fatalf("times differ: %+v", got)
	}
	got.StartedAt, got.FinishedAt, got.ScheduledAt = want.StartedAt, want.FinishedAt, want.ScheduledAt
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("run differs:\n got %+v\nwant %+v", got, want)
	}
	if rs, err := s.Runs(h.Ctx, "none", 5); err != nil || len(rs) != 0 {
		t.Fatalf("unknown job runs: %v %v", rs, err)
	}
}

func testRunReplace(t *testing.T, h *harness) {
	s := h.Open(t)
	r := sampleRun("j", "r1", t0)
	r.Status, r.FinishedAt = scheduler.StatusRunning, time.Time{}
	_ = s.PutRun(h.Ctx, r, 0)
	r.Status, r.FinishedAt = scheduler.StatusError, t0.Add(time.Minute)
	if err := s.PutRun(h.Ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	rs, _ := s.Runs(h.Ctx, "j", 0)
	if len(rs) != 1 || rs[0].Status != scheduler.StatusError {
		t.Fatalf("replace: %+v", rs)
	}
}

func testRetention(t *testing.T, h *harness) {
	s := h.Open(t)
	for i := range 8 {
		if err := s.PutRun(h.Ctx, sampleRun("j", fmt.Sprintf("r%02d", i), t0.Add(time.Duration(i)*time.Minute)), 3); err != nil {
			t.Fatal(err)
		}
	}
	rs, _ := s.Runs(h.Ctx, "j", 0)
	if got := runIDs(rs); !reflect.DeepEqual(got, []string{"r07", "r06", "r05"}) {
		t.Fatalf("retention kept %v", got)
	}
}

func testRunsPerJob(t *testing.T, h *harness) {
	s := h.Open(t)
	for i := range 4 {
		_ = s.PutRun(h.Ctx, sampleRun("a", fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Minute)), 2)
		_ = s.PutRun(h.Ctx, sampleRun("ab", fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Minute)), 0)
	}
	a, _ := s.Runs(h.Ctx, "a", 0)
	ab, _ := s.Runs(h.Ctx, "ab", 0)
	if len(a) != 2 || len(ab) != 4 {
		t.Fatalf("retention leaked across jobs: a=%v ab=%v", runIDs(a), runIDs(ab))
	}
	for _, r := range a {
		if r.JobID != "a" {
			t.Fatalf("run of %s listed for a", r.JobID)
		}
	}
}

func testClaimOnce(t *testing.T, h *harness) {
	s := h.Open(t)
	for i, want := range []bool{true, false, false} {
		got, err := s.ClaimInstant(h.Ctx, "j", t0)
		if err != nil || got != want {
			t.Fatalf("claim %d: got %v err %v, want %v", i, got, err, want)
		}
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "j", t0.In(time.FixedZone("X", 3600))); ok {
		t.Fatal("same instant in another zone claimed again")
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "other", t0); !ok {
		t.Fatal("ledger shared across jobs")
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "j", t0.Add(time.Minute)); !ok {
		t.Fatal("later instant refused")
	}
}

func testClaimMonotonic(t *testing.T, h *harness) {
	s := h.Open(t)
	if ok, _ := s.ClaimInstant(h.Ctx, "j", t0.Add(time.Hour)); !ok {
		t.Fatal("claim refused")
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "j", t0); ok {
		t.Fatal("an instant before the newest claimed one was claimed")
	}
}

func testClaimConcurrent(t *testing.T, h *harness) {
	s := h.Open(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.ClaimInstant(h.Ctx, "j", t0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent claims won", wins)
	}
}

func testCopies(t *testing.T, h *harness) {
	s := h.Open(t)
	j := SampleJob("j1")
	_ = s.PutJob(h.Ctx, j)
	j.Seed[0].Text = "mutated"
	got, _, _ := s.Job(h.Ctx, "j1")
	if got.Seed[0].Text != "hi" {
		t.Fatal("store aliases caller's job")
	}
	got.Seed[0].Text = "mutated"
	again, _, _ := s.Job(h.Ctx, "j1")
	if again.Seed[0].Text != "hi" {
		t.Fatal("store hands out its own job")
	}
	r := sampleRun("j1", "r", t0)
	_ = s.PutRun(h.Ctx, r, 0)
	r.Delivery.MessageIDs[0] = "x"
	rs, _ := s.Runs(h.Ctx, "j1", 0)
	if rs[0].Delivery.MessageIDs[0] != "1" {
		t.Fatal("store aliases caller's run")
	}
}

func testDurable(t *testing.T, h *harness) {
	s := h.Open(t)
	want := SampleJob("j1")
	_ = s.PutJob(h.Ctx, want)
	_ = s.PutRun(h.Ctx, sampleRun("j1", "r1", t0), 0)
	_, _ = s.ClaimInstant(h.Ctx, "j1", t0)
	s = h.Reopen(t, s)
	got, ok, err := s.Job(h.Ctx, "j1")
	if err != nil || !ok {
		t.Fatalf("after reopen: ok=%v err=%v", ok, err)
	}
	equalJob(t, got, want)
	if rs, _ := s.Runs(h.Ctx, "j1", 0); len(rs) != 1 {
		t.Fatalf("runs after reopen: %v", rs)
	}
	if ok, _ := s.ClaimInstant(h.Ctx, "j1", t0); ok {
		t.Fatal("ledger lost across reopen: instant claimed twice")
	}
}
