// Package storetest is the shared frame of the store conformance suites
// (core/binding/bindingtest, core/transcript/transcripttest,
// core/delivery/deliverytest, scheduler/schedulertest): it runs a suite's
// cases against fresh stores from an open function, with an optional reopen
// hook for durability cases.
//
// Invariant: every case gets a new, empty store; a case that needs reopen
// is skipped when the implementation has none (in-memory stores).
package storetest

import (
	"context"
	"testing"
)

// Harness is what a case gets: a context, fresh stores and reopening.
type Harness[S any] struct {
	Ctx    context.Context
	open   func(t *testing.T) S
	reopen func(t *testing.T, s S) S
}

// Open returns a new, empty store.
func (h *Harness[S]) Open(t *testing.T) S { return h.open(t) }

// CanReopen reports whether the implementation supplied a reopen hook.
func (h *Harness[S]) CanReopen() bool { return h.reopen != nil }

// Reopen closes s and returns a store over the same persisted data; it
// skips the case when the implementation is not durable.
func (h *Harness[S]) Reopen(t *testing.T, s S) S {
	t.Helper()
	if h.reopen == nil {
		t.Skip("store has no reopen hook (not durable)")
	}
	return h.reopen(t, s)
}

// Option configures Run.
type Option[S any] func(*Harness[S])

// WithReopen supplies a hook that closes s and returns a store over the
// same persisted data. Without it, durability cases are skipped.
func WithReopen[S any](fn func(t *testing.T, s S) S) Option[S] {
	return func(h *Harness[S]) { h.reopen = fn }
}

// Case is one named conformance check.
type Case[S any] struct {
	Name string
	Fn   func(t *testing.T, h *Harness[S])
}

// Run runs the cases as subtests. open must return a new, empty store for
// each call and arrange its cleanup with t.Cleanup.
func Run[S any](t *testing.T, open func(t *testing.T) S, opts []Option[S], cases []Case[S]) {
	t.Helper()
	h := &Harness[S]{Ctx: context.Background(), open: open}
	for _, o := range opts {
		o(h)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { c.Fn(t, h) })
	}
}
