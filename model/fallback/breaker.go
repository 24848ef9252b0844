package fallback

import (
	"sync"
	"time"
)

// State is a breaker's state.
type State string

// Breaker states.
const (
	Closed   State = "closed"    // the model is called
	Open     State = "open"      // the model is skipped until the cool-down ends
	HalfOpen State = "half-open" // the cool-down ended: one call probes the model
)

// verdict is what one call says about its model's health.
type verdict int

const (
	verdictNone verdict = iota // nothing (cancelled, unclassified)
	verdictUp                  // the provider answered
	verdictDown                // a retryable failure
)

// breaker is one model's circuit breaker, safe for concurrent use.
type breaker struct {
	cfg Breaker

	mu        sync.Mutex
	failures  []time.Time // retryable failures within the window, oldest first
	openUntil time.Time   // zero: closed
	probing   bool        // a half-open probe is in flight
}

func newBreaker(cfg Breaker) *breaker { return &breaker{cfg: cfg} }

// state is the breaker's state at now.
func (b *breaker) state(now time.Time) State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stateLocked(now)
}

func (b *breaker) stateLocked(now time.Time) State {
	switch {
	case b.openUntil.IsZero():
		return Closed
	case now.Before(b.openUntil):
		return Open
	}
	return HalfOpen
}

// allow reports whether a call may go to the model now: always while
// closed, never while open, and once (the probe) after the cool-down.
// changed is true when this call starts the probe.
func (b *breaker) allow(now time.Time) (ok, changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.stateLocked(now) {
	case Closed:
		return true, false
	case Open:
		return false, false
	}
	if b.probing {
		return false, false
	}
	b.probing = true
	return true, true
}

// record applies a call's verdict and returns the state after it, and
// whether the state changed. A failure whose provider said when to try
// again (retry, zero: it did not) opens the breaker until then, bounded by
// MaxRetryAfter, unless the count of failures opened it for longer.
func (b *breaker) record(now time.Time, v verdict, retry time.Time) (State, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cfg.Failures <= 0 {
		return Closed, false
	}
	before := b.stateLocked(now)
	probe := b.probing
	b.probing = false
	switch v {
	case verdictUp:
		b.failures, b.openUntil = b.failures[:0], time.Time{}
	case verdictDown:
		if probe || before == Open {
			b.openUntil = now.Add(b.cfg.Cooldown)
			break
		}
		cut := 0
		for cut < len(b.failures) && !b.failures[cut].After(now.Add(-b.cfg.Window)) {
			cut++
		}
		b.failures = append(b.failures[cut:], now)
		if len(b.failures) >= b.cfg.Failures {
			b.failures, b.openUntil = b.failures[:0], now.Add(b.cfg.Cooldown)
		}
	}
	if v == verdictDown && retry.After(now) {
		retry = minTime(retry, now.Add(b.cfg.MaxRetryAfter))
		if retry.After(b.openUntil) {
			b.failures, b.openUntil = b.failures[:0], retry
		}
	}
	after := b.stateLocked(now)
	return after, after != before
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
