package scheduler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseScheduleErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, sched, tz string
		wantInMsg       string
	}{
		{"empty", "", "", "every 10m"},
		{"four fields", "0 9 * *", "", "a cron expression has 5"},
		{"six fields", "0 0 9 * * *", "", "has 6 fields"},
		{"bad field", "61 9 * * *", "", "not a valid cron expression"},
		{"unknown zone", "0 9 * * *", "Mars/Olympus", "IANA zone name"},
		{"local zone", "0 9 * * *", "Local", "IANA zone name"},
		{"tz inside expr", "CRON_TZ=Europe/Berlin 0 9 * * *", "", "tz option"},
		{"robfig every", "@every 10m", "", "every 10m"},
		{"every without interval", "every", "", "every 10m"},
		{"every garbage", "every soon", "", "units s, m, h"},
		{"every too short", "every 30s", "", "shortest interval is `every 1m`"},
		{"at without time", "at", "", "RFC 3339"},
		{"at garbage", "at tomorrow", "", "not an RFC 3339 time"},
		{"at past", "at 2026-02-01T09:00:00Z", "", "in the past"},
		{"at now", "at 2026-03-01T12:00:00Z", "", "in the past"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scheduler.ParseSchedule(tc.sched, time.UTC, tc.tz, now)
			var ue *scheduler.UserError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want *UserError", err)
			}
			if !strings.Contains(ue.Msg, tc.wantInMsg) {
				t.Fatalf("message %q does not contain %q", ue.Msg, tc.wantInMsg)
			}
		})
	}
}

func TestParseScheduleValid(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // a Sunday
	berlin := mustLoc(t, "Europe/Berlin")
	tests := []struct {
		name, sched, tz string
		def             *time.Location
		wantKind        scheduler.ScheduleKind
		wantNext        time.Time
		wantTZ          string
	}{
		{"cron utc", "30 9 * * 1-5", "", time.UTC, scheduler.KindCron, time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC), "UTC"},
		{"cron job zone", "30 9 * * *", "Europe/Berlin", time.UTC, scheduler.KindCron, time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC), "Europe/Berlin"},
		{"cron default zone", "30 9 * * *", "", berlin, scheduler.KindCron, time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC), "Europe/Berlin"},
		{"descriptor", "@daily", "", time.UTC, scheduler.KindCron, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), "UTC"},
		{"every", "every 10m", "", time.UTC, scheduler.KindEvery, now.Add(10 * time.Minute), "UTC"},
		{"every spaced", "Every 1h 30m", "", time.UTC, scheduler.KindEvery, now.Add(90 * time.Minute), "UTC"},
		{"every minimum", "every 1m", "", time.UTC, scheduler.KindEvery, now.Add(time.Minute), "UTC"},
		{"at rfc3339", "at 2026-03-05T09:00:00+02:00", "", time.UTC, scheduler.KindAt, time.Date(2026, 3, 5, 7, 0, 0, 0, time.UTC), "UTC"},
		{"at local wall time", "at 2026-03-05T09:00", "Europe/Berlin", time.UTC, scheduler.KindAt, time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC), "Europe/Berlin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scheduler.ParseSchedule(tc.sched, tc.def, tc.tz, now)
			if err != nil {
				t.Fatal(err)
			}
			sp := s.Spec()
			if sp.Kind != tc.wantKind || sp.TZ != tc.wantTZ || sp.Text == "" {
				t.Fatalf("spec %+v", sp)
			}
			if got := s.Next(now); !got.Equal(tc.wantNext) {
				t.Fatalf("next = %v, want %v", got.UTC(), tc.wantNext)
			}
			// The stored spec rebuilds the same schedule.
			again, err := scheduler.FromSpec(sp)
			if err != nil {
				t.Fatal(err)
			}
			if got := again.Next(now); !got.Equal(tc.wantNext) {
				t.Fatalf("rebuilt next = %v, want %v", got, tc.wantNext)
			}
		})
	}
}

func TestEveryAndAtNext(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	every, _ := scheduler.ParseSchedule("every 10m", time.UTC, "", now)
	if got := every.Next(now.Add(25 * time.Minute)); !got.Equal(now.Add(30 * time.Minute)) {
		t.Fatalf("every next = %v", got)
	}
	if got := every.Next(now.Add(30 * time.Minute)); !got.Equal(now.Add(40 * time.Minute)) {
		t.Fatalf("every next is not strictly after: %v", got)
	}
	at, _ := scheduler.ParseSchedule("at 2026-03-01T13:00:00Z", time.UTC, "", now)
	if got := at.Next(now); !got.Equal(now.Add(time.Hour)) {
		t.Fatalf("at next = %v", got)
	}
	if got := at.Next(now.Add(time.Hour)); !got.IsZero() {
		t.Fatalf("at fires twice: %v", got)
	}
}

// instants lists the schedule's instants in [from, to] in UTC.
func instants(t *testing.T, expr, tz string, from, to time.Time) []time.Time {
	t.Helper()
	s, err := scheduler.ParseSchedule(expr, time.UTC, tz, from)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := scheduler.Instants(s, from, to, 100)
	for i := range out {
		out[i] = out[i].UTC()
	}
	return out
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

func TestCronAcrossDST(t *testing.T) {
	tests := []struct {
		name, expr, tz string
		from, to       time.Time
		want           []time.Time
	}{
		{
			// Last Sunday of March 2026 (29th): 02:00 CET -> 03:00 CEST. 02:30 does not
			// exist; the job runs once at the end of the gap (03:00 CEST = 01:00 UTC).
			name: "Berlin spring-forward 02:30", expr: "30 2 * * *", tz: "Europe/Berlin",
			from: utc(2026, 3, 27, 12, 0), to: utc(2026, 3, 31, 12, 0),
			want: []time.Time{utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30), utc(2026, 3, 31, 0, 30)},
		},
		{
			// Oct 25 2026: 03:00 CEST -> 02:00 CET; 02:30 happens twice, the job runs at the first.
			name: "Berlin fall-back 02:30 runs once", expr: "30 2 * * *", tz: "Europe/Berlin",
			from: utc(2026, 10, 23, 12, 0), to: utc(2026, 10, 26, 12, 0),
			want: []time.Time{utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)},
		},
		{
			name: "Berlin fall-back hourly follows real time", expr: "0 * * * *", tz: "Europe/Berlin",
			from: utc(2026, 10, 24, 23, 30), to: utc(2026, 10, 25, 2, 30),
			want: []time.Time{utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 2, 0)},
		},
		{
			name: "Berlin spring-forward hourly does not catch up the gap", expr: "30 * * * *", tz: "Europe/Berlin",
			from: utc(2026, 3, 28, 23, 45), to: utc(2026, 3, 29, 2, 0),
			want: []time.Time{utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 30)},
		},
		{
			// Mar 8 2026: 02:00 EST -> 03:00 EDT.
			name: "New York spring-forward 02:30", expr: "30 2 * * *", tz: "America/New_York",
			from: utc(2026, 3, 7, 12, 0), to: utc(2026, 3, 9, 12, 0),
			want: []time.Time{utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)},
		},
		{
			// Nov 1 2026: 02:00 EDT -> 01:00 EST; 01:30 happens twice.
			name: "New York fall-back 01:30 runs once", expr: "30 1 * * *", tz: "America/New_York",
			from: utc(2026, 10, 31, 12, 0), to: utc(2026, 11, 2, 12, 0),
			want: []time.Time{utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)},
		},
		{
			name: "New York 09:00 weekdays keeps local time across DST", expr: "0 9 * * 1-5", tz: "America/New_York",
			from: utc(2026, 3, 6, 0, 0), to: utc(2026, 3, 10, 0, 0),
			want: []time.Time{utc(2026, 3, 6, 14, 0), utc(2026, 3, 9, 13, 0)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := instants(t, tc.expr, tc.tz, tc.from, tc.to)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
			for i := range got {
				if !got[i].Equal(tc.want[i]) {
					t.Fatalf("instant %d = %v, want %v (all %v)", i, got[i], tc.want[i], got)
				}
			}
		})
	}
}
