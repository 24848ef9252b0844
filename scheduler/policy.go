package scheduler

import (
	"fmt"
	"time"
)

// Policy constants.
const (
	// LateAfter: a run that starts more than this after its instant is late.
	LateAfter = time.Minute
	// AutoDisableAfter consecutive failures turns a job off (with a notice).
	AutoDisableAfter = 10
	// MaxAtAttempts: a one-shot job that fails is retried (with backoff) until
	// it failed this many times, then turned off.
	MaxAtAttempts = 3
	// DefaultRunRetention is the run records kept per job when the setting is 0.
	DefaultRunRetention = 50
	// maxInstants bounds how many missed instants are counted after downtime.
	maxInstants = 1 << 16
)

var backoffSteps = []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}

// Backoff is the pause after n consecutive failures: 0 for none, then 30s,
// 1m, 5m, 15m and 60m from the fifth on.
func Backoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	return backoffSteps[min(failures, len(backoffSteps))-1]
}

// NextRun is when a job runs next after it ran for instant at and finished
// at finished with failures consecutive failures. Recurring jobs stay on
// their grid: the next instant after at, or after a failure the first
// instant at least Backoff(failures) after finished. A one-shot job has no
// next run after success; after a failure it is retried once the backoff
// has passed, until MaxAtAttempts. Zero means no next run.
func NextRun(s Schedule, at, finished time.Time, failures int) time.Time {
	if s.Spec().Kind == KindAt {
		if failures == 0 || failures >= MaxAtAttempts {
			return time.Time{}
		}
		return finished.Add(Backoff(failures))
	}
	if failures == 0 {
		return s.Next(at)
	}
	earliest := finished.Add(Backoff(failures))
	if at.After(earliest) {
		earliest = at
	}
	return s.Next(earliest.Add(-time.Nanosecond))
}

// ShouldAlert reports whether a job with failures consecutive failures,
// last alerted at lastAlert, posts a failure alert now.
func ShouldAlert(fa FailureAlert, failures int, lastAlert, now time.Time) bool {
	if fa.After <= 0 || failures < fa.After {
		return false
	}
	return lastAlert.IsZero() || now.Sub(lastAlert) >= fa.Cooldown
}

// CatchUp is the decision for a job found due at now.
type CatchUp struct {
	// Run are the instants to run now, oldest first (empty: skip them all).
	Run []time.Time
	// Skipped are the due instants that will not run.
	Skipped []time.Time
	// Late is set when the runs are late (started more than LateAfter after their instant).
	Late bool
	// More is set when more instants were missed than were counted.
	More bool
}

// PlanDue decides what runs for a job whose next run (next) is due at now.
// Every instant from next to now is due. When the newest is on time it
// runs and the older ones are skipped (they were missed). When all are late
// (the bot was down, or a long run overlapped them) the newest maxCatchUp
// (at least one) run once each and are marked late, unless catchUp is off,
// then all are skipped.
func PlanDue(s Schedule, next, now time.Time, catchUp bool, maxCatchUp int) CatchUp {
	due := []time.Time{next}
	more, moreFlag := Instants(s, next.Add(time.Nanosecond), now, maxInstants)
	due = append(due, more...)
	newest := due[len(due)-1]
	if now.Sub(newest) <= LateAfter {
		return CatchUp{Run: []time.Time{newest}, Skipped: due[:len(due)-1], More: moreFlag}
	}
	if !catchUp {
		return CatchUp{Skipped: due, Late: true, More: moreFlag}
	}
	n := max(maxCatchUp, 1)
	if n > len(due) {
		n = len(due)
	}
	return CatchUp{Run: due[len(due)-n:], Skipped: due[:len(due)-n], Late: true, More: moreFlag}
}

// HumanDuration writes a lateness for people: 3h, 3h5m, 45m, 30s, 2d4h.
func HumanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	default:
		days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	}
}
