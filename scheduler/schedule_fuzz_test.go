package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseSchedule: whatever a user writes, ParseSchedule does not panic;
// a refusal is a *UserError with one readable line; an accepted schedule's
// next instants move strictly forward, and its stored spec rebuilds the
// same schedule (what a restart does).
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{
		"30 9 * * 1-5", "*/15 * * * *", "@daily", "@hourly", "@every 5m", "0 0 30 2 *", "0 2 * * *",
		"every 10m", "every 1h30m", "every 1 h", "every 30s", "every", "every 2562047h", "every 1000000h",
		"at 2027-05-01T09:00:00Z", "at 2027-05-01T09:00", "at 2027-05-01 09:00", "at 2020-01-01T00:00:00Z", "at",
		"CRON_TZ=Europe/Berlin 0 9 * * *", "TZ=UTC 0 9 * * *", "60 25 32 13 8", "", "  ", "\x00", "every \xff",
	} {
		for _, tz := range []string{"", "Europe/Berlin", "America/New_York", "local", "Nowhere/City"} {
			f.Add(s, tz)
		}
	}
	now := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s, tz string) {
		sched, err := ParseSchedule(s, time.UTC, tz, now)
		if err != nil {
			var ue *UserError
			if !errors.As(err, &ue) {
				t.Fatalf("ParseSchedule(%q, %q) error %T %v is not a *UserError", s, tz, err, err)
			}
			msg := err.Error()
			if strings.TrimSpace(msg) == "" || strings.ContainsAny(msg, "\n\r") || !utf8.ValidString(msg) {
				t.Fatalf("ParseSchedule(%q, %q) error is not one readable line: %q", s, tz, msg)
			}
			return
		}
		spec := sched.Spec()
		again, err := FromSpec(spec)
		if err != nil {
			t.Fatalf("FromSpec(%+v) of an accepted schedule %q: %v", spec, s, err)
		}
		at := now
		for i := 0; i < 4; i++ {
			next := sched.Next(at)
			if next.IsZero() {
				break
			}
			if !next.After(at) {
				t.Fatalf("%q: Next(%v) = %v, not after", s, at, next)
			}
			if re := again.Next(at); !re.Equal(next) {
				t.Fatalf("%q: rebuilt schedule's Next(%v) = %v, want %v", s, at, re, next)
			}
			at = next
		}
	})
}
