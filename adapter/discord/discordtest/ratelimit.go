package discordtest

import (
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// RateLimit configures one bucket: requests matching Method and Route share Limit requests per
// Window, separately for each top-level resource (channel, guild, webhook id+token).
type RateLimit struct {
	Method string // "" matches any method
	Route  string // template as in Request.Route, e.g. "/channels/{channel_id}/messages"
	Limit  int
	Window time.Duration
}

// RateLimitStats counts the 429 responses served.
type RateLimitStats struct {
	Total    int
	Global   int
	ByBucket map[string]int // "METHOD route major" -> count
}

// unlimitedHeaderLimit is advertised for routes without a configured bucket.
const unlimitedHeaderLimit = 10000

type window struct {
	count int
	reset time.Time
}

type rateLimiter struct {
	routes       []RateLimit
	global       int
	globalWindow time.Duration
	globalState  window
	buckets      map[string]*window
	stats        RateLimitStats
}

// TypingLimit is the typing bucket the emulator always enforces (per
// channel) unless Options.RateLimits configures that route: a bot showing
// "typing" must pace itself whatever a test configures.
var TypingLimit = RateLimit{Method: "POST", Route: "/channels/{channel_id}/typing", Limit: 5, Window: 5 * time.Second}

// EditLimit is the message-edit bucket the emulator always enforces (per
// channel, all messages of the channel together) unless Options.RateLimits
// configures that route: Discord limits a bot's edits in a channel to
// about 5 per 5 s, so a streamed reply must pace its edits.
var EditLimit = RateLimit{Method: "PATCH", Route: "/channels/{channel_id}/messages/{message_id}", Limit: 5, Window: 5 * time.Second}

func newRateLimiter(routes []RateLimit, global int, gw time.Duration) rateLimiter {
	routes = append([]RateLimit(nil), routes...)
	for _, always := range []RateLimit{TypingLimit, EditLimit} {
		if !slices.ContainsFunc(routes, func(r RateLimit) bool { return r.Route == always.Route && r.Method == always.Method }) {
			routes = append(routes, always)
		}
	}
	return rateLimiter{
		routes: routes, global: global, globalWindow: gw,
		buckets: map[string]*window{}, stats: RateLimitStats{ByBucket: map[string]int{}},
	}
}

// limited describes a 429 to serve.
type limited struct {
	retryAfter time.Duration
	global     bool
	scope      string
	hdr        http.Header
}

func (l *limited) headers(h http.Header) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(l.retryAfter.Seconds()))))
	h.Set("X-RateLimit-Scope", l.scope)
	if l.global {
		h.Set("X-RateLimit-Global", "true")
	}
	l.hdr = h
	return h
}

func (l *limited) reply() reply {
	return reply{status: http.StatusTooManyRequests, body: map[string]any{
		"message": "You are being rate limited.", "retry_after": math.Round(l.retryAfter.Seconds()*1000) / 1000,
		"global": l.global,
	}}
}

func (w *window) roll(now time.Time, d time.Duration) {
	if !now.Before(w.reset) {
		w.count = 0
		w.reset = now.Add(d)
	}
}

func bucketHash(method, tmpl string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(method + " " + tmpl))
	return fmt.Sprintf("%016x", h.Sum64())
}

func (l *rateLimiter) find(method, tmpl string) *RateLimit {
	for i := range l.routes {
		r := &l.routes[i]
		if (r.Method == "" || r.Method == method) && r.Route == tmpl && r.Limit > 0 {
			return r
		}
	}
	return nil
}

// take accounts one request. It returns the X-RateLimit headers and, when the request must be
// refused, a non-nil *limited. Caller holds e.mu.
func (l *rateLimiter) take(now time.Time, method, tmpl, major string, countsGlobal bool) (http.Header, *limited) {
	h := http.Header{}
	h.Set("X-RateLimit-Bucket", bucketHash(method, tmpl))
	if countsGlobal && l.global > 0 {
		l.globalState.roll(now, l.globalWindow)
		if l.globalState.count >= l.global {
			lim := &limited{retryAfter: l.globalState.reset.Sub(now), global: true, scope: "global"}
			l.stats.Total++
			l.stats.Global++
			return lim.headers(h), lim
		}
		l.globalState.count++
	}
	cfg := l.find(method, tmpl)
	if cfg == nil {
		h.Set("X-RateLimit-Limit", strconv.Itoa(unlimitedHeaderLimit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(unlimitedHeaderLimit-1))
		setReset(h, now, time.Second)
		return h, nil
	}
	key := method + " " + tmpl + " " + major
	w := l.buckets[key]
	if w == nil {
		w = &window{}
		l.buckets[key] = w
	}
	w.roll(now, cfg.Window)
	h.Set("X-RateLimit-Limit", strconv.Itoa(cfg.Limit))
	if w.count >= cfg.Limit {
		h.Set("X-RateLimit-Remaining", "0")
		setReset(h, now, w.reset.Sub(now))
		lim := &limited{retryAfter: w.reset.Sub(now), scope: "user"}
		l.stats.Total++
		l.stats.ByBucket[key]++
		return lim.headers(h), lim
	}
	w.count++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(cfg.Limit-w.count))
	setReset(h, now, w.reset.Sub(now))
	return h, nil
}

// countFault records an injected 429 and returns its description.
func (l *rateLimiter) countFault(f *Fault, tmpl, major string) *limited {
	ra := f.RetryAfter
	if ra <= 0 {
		ra = 100 * time.Millisecond
	}
	l.stats.Total++
	l.stats.ByBucket[f.Method+" "+tmpl+" "+major]++
	return &limited{retryAfter: ra, scope: "user"}
}

func setReset(h http.Header, now time.Time, after time.Duration) {
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(after.Seconds(), 'f', 3, 64))
	reset := float64(now.Add(after).UnixMilli()) / 1000
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(reset, 'f', 3, 64))
}

// RateLimited returns the counts of 429 responses served so far.
func (e *Emulator) RateLimited() RateLimitStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.limits.stats
	s.ByBucket = map[string]int{}
	for k, v := range e.limits.stats.ByBucket {
		s.ByBucket[k] = v
	}
	return s
}

// SetRateLimit adds or replaces (same Method and Route) a bucket configuration at run time.
func (e *Emulator) SetRateLimit(rl RateLimit) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, r := range e.limits.routes {
		if r.Method == rl.Method && r.Route == rl.Route {
			e.limits.routes[i] = rl
			return
		}
	}
	e.limits.routes = append(e.limits.routes, rl)
}

// SetGlobalLimit sets the global requests-per-window limit (0 disables it).
func (e *Emulator) SetGlobalLimit(n int, per time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.limits.global = n
	if per > 0 {
		e.limits.globalWindow = per
	}
	e.limits.globalState = window{}
}
