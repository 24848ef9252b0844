// Package store holds what the store drivers (store/bolt, store/memory,
// store/postgres) share with their callers: the errors a caller may act on
// whatever the driver. It imports nothing and does no I/O, so core packages
// may depend on it.
package store

import "errors"

// ErrUnavailable wraps a store call's error when the store could not be
// reached for longer than the driver waits (store/postgres retries
// transient failures with bounded backoff first: a restart or failover of
// the database, a dropped connection), or when a write's outcome is
// unknown and replaying it would not be safe. The call did not take
// effect, or (outcome unknown) may have; either way the caller's work is
// not recorded as done and may be tried again later. Test with errors.Is.
var ErrUnavailable = errors.New("store unavailable")
