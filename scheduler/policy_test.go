package scheduler_test

import (
	"testing"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

func TestBackoff(t *testing.T) {
	want := []time.Duration{0, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, time.Hour, time.Hour}
	for n, w := range want {
		if got := scheduler.Backoff(n); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w)
		}
	}
}

func TestNextRun(t *testing.T) {
	t0 := utc(2026, 3, 2, 9, 0)
	every, _ := scheduler.ParseSchedule("every 1m", time.UTC, "", t0)
	hourly, _ := scheduler.ParseSchedule("0 * * * *", time.UTC, "", t0)
	at, _ := scheduler.ParseSchedule("at 2026-03-02T10:00:00Z", time.UTC, "", t0)
	tests := []struct {
		name     string
		s        scheduler.Schedule
		at, fin  time.Time
		failures int
		want     time.Time
	}{
		{"ok: next instant", every, t0.Add(time.Minute), t0.Add(time.Minute + 5*time.Second), 0, t0.Add(2 * time.Minute)},
		{"1 failure: 30s backoff, next grid point", every, t0.Add(time.Minute), t0.Add(time.Minute + 10*time.Second), 1, t0.Add(2 * time.Minute)},
		{"3 failures: 5m backoff on the grid", every, t0.Add(time.Minute), t0.Add(time.Minute), 3, t0.Add(6 * time.Minute)},
		{"5 failures: 60m", every, t0.Add(time.Minute), t0.Add(time.Minute), 5, t0.Add(61 * time.Minute)},
		{"hourly 5 failures lands on next hour after backoff", hourly, t0, t0.Add(time.Second), 5, t0.Add(2 * time.Hour)},
		{"hourly 1 failure: next hour", hourly, t0, t0.Add(time.Second), 1, t0.Add(time.Hour)},
		{"at ok: done", at, utc(2026, 3, 2, 10, 0), utc(2026, 3, 2, 10, 0), 0, time.Time{}},
		{"at failure: retry after backoff", at, utc(2026, 3, 2, 10, 0), utc(2026, 3, 2, 10, 1), 1, utc(2026, 3, 2, 10, 1).Add(30 * time.Second)},
		{"at third failure: give up", at, utc(2026, 3, 2, 10, 0), utc(2026, 3, 2, 10, 1), scheduler.MaxAtAttempts, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scheduler.NextRun(tc.s, tc.at, tc.fin, tc.failures); !got.Equal(tc.want) {
				t.Fatalf("NextRun = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShouldAlert(t *testing.T) {
	fa := scheduler.FailureAlert{After: 2, Cooldown: time.Hour}
	now := utc(2026, 3, 2, 9, 0)
	tests := []struct {
		name      string
		fa        scheduler.FailureAlert
		failures  int
		lastAlert time.Time
		want      bool
	}{
		{"below threshold", fa, 1, time.Time{}, false},
		{"at threshold", fa, 2, time.Time{}, true},
		{"within cooldown", fa, 3, now.Add(-59 * time.Minute), false},
		{"cooldown passed", fa, 4, now.Add(-time.Hour), true},
		{"alerts off", scheduler.FailureAlert{}, 5, time.Time{}, false},
	}
	for _, tc := range tests {
		if got := scheduler.ShouldAlert(tc.fa, tc.failures, tc.lastAlert, now); got != tc.want {
			t.Errorf("%s: got %v want %v", tc.name, got, tc.want)
		}
	}
}

func TestPlanDue(t *testing.T) {
	t0 := utc(2026, 3, 2, 9, 0)
	hourly, _ := scheduler.ParseSchedule("0 * * * *", time.UTC, "", t0)
	tests := []struct {
		name        string
		now         time.Time
		catchUp     bool
		max         int
		wantRun     []time.Time
		wantSkipped int
		wantLate    bool
	}{
		{"on time", t0.Add(2 * time.Second), true, 1, []time.Time{t0}, 0, false},
		{"down 3h30: once, late", t0.Add(3*time.Hour + 30*time.Minute), true, 1, []time.Time{t0.Add(3 * time.Hour)}, 3, true},
		{"down, newest on time: runs it, older skipped", t0.Add(3*time.Hour + 10*time.Second), true, 1, []time.Time{t0.Add(3 * time.Hour)}, 3, false},
		{"catch-up off", t0.Add(3*time.Hour + 30*time.Minute), false, 1, nil, 4, true},
		{"max 2", t0.Add(3*time.Hour + 30*time.Minute), true, 2, []time.Time{t0.Add(2 * time.Hour), t0.Add(3 * time.Hour)}, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := scheduler.PlanDue(hourly, t0, tc.now, tc.catchUp, tc.max)
			if len(p.Run) != len(tc.wantRun) || len(p.Skipped) != tc.wantSkipped || p.Late != tc.wantLate {
				t.Fatalf("plan %+v", p)
			}
			for i := range p.Run {
				if !p.Run[i].Equal(tc.wantRun[i]) {
					t.Fatalf("run %d = %v want %v", i, p.Run[i], tc.wantRun[i])
				}
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second: "30s", 45 * time.Minute: "45m", 3 * time.Hour: "3h",
		3*time.Hour + 5*time.Minute: "3h5m", 52 * time.Hour: "2d4h", 72 * time.Hour: "3d",
	} {
		if got := scheduler.HumanDuration(d); got != want {
			t.Errorf("HumanDuration(%v) = %q want %q", d, got, want)
		}
	}
}
