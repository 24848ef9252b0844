package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest `every` interval. Shorter intervals would make a
// model-backed job post faster than people read and burn model quota.
const MinEvery = time.Minute

// Schedule computes run instants. Next returns the first instant strictly
// after t, or the zero time when there is none (a one-shot that passed).
// Schedule satisfies cron.Schedule, so the same value drives the trigger.
type Schedule interface {
	Next(t time.Time) time.Time
	Spec() ScheduleSpec
}

// ParseSchedule reads what a user wrote:
//   - a 5-field cron expression ("30 9 * * 1-5") or a descriptor (@daily, @hourly, ...),
//     read in the zone tz (or defaultTZ when tz is empty);
//   - "every <duration>" ("every 10m", "every 2h"), at least MinEvery, anchored at now;
//   - "at <RFC 3339 time>" ("at 2026-05-01T09:00:00+02:00"), which must be in the future;
//     a time without offset ("at 2026-05-01T09:00") is read in the zone.
//
// Errors are *UserError values whose text says what to write instead.
func ParseSchedule(s string, defaultTZ *time.Location, tz string, now time.Time) (Schedule, error) {
	s = strings.TrimSpace(s)
	loc, tzName, err := resolveTZ(defaultTZ, tz)
	if err != nil {
		return nil, err
	}
	if s == "" {
		return nil, userErrorf("the schedule is empty: write a cron expression like `30 9 * * 1-5`, `every 10m`, or `at 2026-05-01T09:00:00Z`")
	}
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "every ") || lower == "every":
		return parseEvery(s, strings.TrimSpace(s[len("every"):]), tzName, now)
	case strings.HasPrefix(lower, "at ") || lower == "at":
		return parseAt(s, strings.TrimSpace(s[len("at"):]), loc, tzName, now)
	default:
		return parseCron(s, loc, tzName)
	}
}

func resolveTZ(def *time.Location, tz string) (*time.Location, string, error) {
	tz = strings.TrimSpace(tz)
	if tz == "" {
		if def == nil {
			def = time.UTC
		}
		return def, def.String(), nil
	}
	if strings.EqualFold(tz, "local") {
		return nil, "", userErrorf("time zone %q depends on the host: write an IANA zone name such as `Europe/Berlin` or `UTC`", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, "", userErrorf("unknown time zone %q: write an IANA zone name such as `Europe/Berlin`, `America/New_York` or `UTC`", tz)
	}
	return loc, loc.String(), nil
}

// FromSpec rebuilds a stored schedule.
func FromSpec(sp ScheduleSpec) (Schedule, error) {
	loc, _, err := resolveTZ(time.UTC, sp.TZ)
	if err != nil {
		return nil, err
	}
	switch sp.Kind {
	case KindCron:
		return parseCron(sp.Expr, loc, loc.String())
	case KindEvery:
		if sp.Every <= 0 {
			return nil, fmt.Errorf("every schedule with interval %v", sp.Every)
		}
		return everySchedule{spec: sp}, nil
	case KindAt:
		return atSchedule{spec: sp}, nil
	}
	return nil, fmt.Errorf("unknown schedule kind %q", sp.Kind)
}

// ---- every ----

type everySchedule struct{ spec ScheduleSpec }

func parseEvery(text, arg string, tz string, now time.Time) (Schedule, error) {
	if arg == "" {
		return nil, userErrorf("`every` needs an interval: write `every 10m`, `every 2h` or `every 1h30m`")
	}
	d, err := time.ParseDuration(strings.ReplaceAll(arg, " ", ""))
	if err != nil {
		return nil, userErrorf("%q is not an interval: write `every 10m`, `every 2h` or `every 1h30m` (units s, m, h)", arg)
	}
	if d < MinEvery {
		return nil, userErrorf("`every %s` is too often: the shortest interval is `every %s`", arg, shortDuration(MinEvery))
	}
	return everySchedule{spec: ScheduleSpec{Kind: KindEvery, Every: d, Anchor: now.UTC(), TZ: tz, Text: text}}, nil
}

func (e everySchedule) Spec() ScheduleSpec { return e.spec }

// Next is the first anchor + k*interval strictly after t. It steps from
// the last instant not after t: (k+1)*interval overflows a Duration for a
// long interval (found by FuzzParseSchedule: `every 2562047h` went back to
// 2026 after its first run), and t.Sub saturates beyond ~292 years.
func (e everySchedule) Next(t time.Time) time.Time {
	a, iv := e.spec.Anchor, e.spec.Every
	if t.Before(a) {
		return a
	}
	for {
		d := t.Sub(a)
		a = a.Add(d / iv * iv) // (d/iv)*iv <= d: no overflow
		if d < math.MaxInt64 {
			break // not saturated: a is the last instant not after t
		}
	}
	for !a.After(t) {
		a = a.Add(iv)
	}
	return a
}

// ---- at ----

type atSchedule struct{ spec ScheduleSpec }

func parseAt(text, arg string, loc *time.Location, tz string, now time.Time) (Schedule, error) {
	if arg == "" {
		return nil, userErrorf("`at` needs a time: write `at 2026-05-01T09:00:00Z` or `at 2026-05-01T09:00:00+02:00` (RFC 3339)")
	}
	at, err := time.Parse(time.RFC3339, arg)
	if err != nil {
		var err2 error
		for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
			if at, err2 = time.ParseInLocation(layout, arg, loc); err2 == nil {
				break
			}
		}
		if err2 != nil {
			return nil, userErrorf("%q is not an RFC 3339 time: write `at 2026-05-01T09:00:00Z` or `at 2026-05-01T09:00:00+02:00`", arg)
		}
	}
	if !at.After(now) {
		return nil, userErrorf("%s is in the past (now it is %s): write a future time, or `every ...` for a repeating job",
			at.In(loc).Format(time.RFC3339), now.In(loc).Format(time.RFC3339))
	}
	return atSchedule{spec: ScheduleSpec{Kind: KindAt, At: at.UTC(), TZ: tz, Text: text}}, nil
}

func (a atSchedule) Spec() ScheduleSpec { return a.spec }

func (a atSchedule) Next(t time.Time) time.Time {
	if t.Before(a.spec.At) {
		return a.spec.At
	}
	return time.Time{}
}

// ---- cron ----

// cronSchedule wraps robfig's SpecSchedule with DST rules for expressions
// with a fixed hour (Vixie cron's behaviour):
//   - spring-forward: an instant whose wall time falls in the skipped hour
//     runs once, at the first instant after the gap (03:00 CEST for a 02:30
//     Europe/Berlin job on the last Sunday of March) instead of being lost;
//   - fall-back: a wall time that occurs twice runs only at its first
//     occurrence.
//
// Expressions with a wildcard hour ("*/15 * * * *") follow real time: they
// neither catch up the skipped hour nor skip the repeated one.
type cronSchedule struct {
	spec      ScheduleSpec
	sched     *cron.SpecSchedule
	loc       *time.Location
	fixedHour bool
}

const starBit = 1 << 63

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parseCron(expr string, loc *time.Location, tz string) (Schedule, error) {
	lower := strings.ToLower(expr)
	if strings.HasPrefix(lower, "cron_tz=") || strings.HasPrefix(lower, "tz=") {
		return nil, userErrorf("put the time zone in the tz option (e.g. tz `Europe/Berlin`) and write only the 5 cron fields, e.g. `30 9 * * *`")
	}
	if strings.HasPrefix(lower, "@every") {
		return nil, userErrorf("write intervals as `every 10m`, not %q", expr)
	}
	if !strings.HasPrefix(expr, "@") {
		if n := len(strings.Fields(expr)); n != 5 {
			fields := "fields"
			if n == 1 {
				fields = "field"
			}
			return nil, userErrorf("%q has %d %s; a cron expression has 5: minute hour day-of-month month day-of-week, e.g. `30 9 * * 1-5` (09:30 on weekdays); or write `every 10m` or `at 2026-05-01T09:00:00Z`", expr, n, fields)
		}
	}
	s, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + expr)
	if err != nil {
		return nil, userErrorf("%q is not a valid cron expression (%s): write 5 fields, minute hour day-of-month month day-of-week, e.g. `30 9 * * 1-5`, or `every 10m`, or `at 2026-05-01T09:00:00Z`", expr, readable(err.Error()))
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, userErrorf("%q is not supported: write a 5-field cron expression such as `0 9 * * *`", expr)
	}
	return cronSchedule{
		spec:      ScheduleSpec{Kind: KindCron, Expr: expr, TZ: tz, Text: expr},
		sched:     spec,
		loc:       loc,
		fixedHour: spec.Hour&starBit == 0,
	}, nil
}

func (c cronSchedule) Spec() ScheduleSpec { return c.spec }

func (c cronSchedule) Next(t time.Time) time.Time {
	for range 8 {
		n := c.sched.Next(t)
		if n.IsZero() || !c.fixedHour {
			return n
		}
		if g := c.gapInstant(t, n); !g.IsZero() {
			return g
		}
		if c.repeatedWall(n) {
			t = n
			continue
		}
		return n
	}
	return time.Time{}
}

// gapInstant returns the end of a spring-forward gap in (t, n) during which
// the expression would have matched a skipped wall time, or zero.
func (c cronSchedule) gapInstant(t, n time.Time) time.Time {
	cur := t.In(c.loc)
	for range 4 {
		_, end := cur.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		_, before := cur.Zone()
		after := end.In(c.loc)
		_, afterOff := after.Zone()
		if end.After(t) && afterOff > before {
			gap := time.Duration(afterOff-before) * time.Second
			// The skipped wall times are [after-gap, after) on after's date.
			wall := time.Date(after.Year(), after.Month(), after.Day(), after.Hour(), after.Minute(), 0, 0, time.UTC).Add(-gap)
			for m := time.Duration(0); m < gap; m += time.Minute {
				if c.matchesWall(wall.Add(m)) {
					return end
				}
			}
		}
		cur = after
	}
	return time.Time{}
}

// repeatedWall reports whether n is the second occurrence of its wall time
// (inside the repeated hour after a fall-back transition).
func (c cronSchedule) repeatedWall(n time.Time) bool {
	n = n.In(c.loc)
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, prevOff := start.Add(-time.Second).In(c.loc).Zone()
	_, curOff := n.Zone()
	return prevOff > curOff && n.Sub(start) < time.Duration(prevOff-curOff)*time.Second
}

// matchesWall reports whether the expression matches a wall time (given in UTC fields).
func (c cronSchedule) matchesWall(w time.Time) bool {
	s := c.sched
	if s.Minute&(1<<uint(w.Minute())) == 0 || s.Hour&(1<<uint(w.Hour())) == 0 || s.Month&(1<<uint(w.Month())) == 0 {
		return false
	}
	dom := s.Dom&(1<<uint(w.Day())) != 0
	dow := s.Dow&(1<<uint(w.Weekday())) != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// Instants returns the scheduled instants in [from, to] (from itself
// included when it is one), at most max, and whether there were more.
func Instants(s Schedule, from, to time.Time, max int) (out []time.Time, more bool) {
	t := from.Add(-time.Nanosecond)
	for {
		n := s.Next(t)
		if n.IsZero() || n.After(to) {
			return out, false
		}
		if len(out) == max {
			return out, true
		}
		out = append(out, n)
		t = n
	}
}

// shortDuration formats 1h0m0s as 1h, 10m0s as 10m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// readable makes text that may echo user input (the cron parser's errors
// do) one printable line: control characters and invalid UTF-8 are
// escaped (found by FuzzParseSchedule: "@\x85" and newlines reached the
// chat verbatim).
func readable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
