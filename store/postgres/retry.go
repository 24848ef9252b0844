package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbot/agentbot/store"
)

// Defaults for RetryOptions.
const (
	// DefaultRetryBudget bounds how long one store call waits, in total,
	// for the database to come back: a restart or a failover takes seconds.
	DefaultRetryBudget = 30 * time.Second
	DefaultRetryFirst  = 100 * time.Millisecond
	DefaultRetryMax    = 5 * time.Second
)

// RetryOptions tunes how a store call survives the database going away for
// a while (DESIGN §3 invariant 16). The zero value is valid.
type RetryOptions struct {
	// Budget is the most one call waits between its attempts, in total
	// (default DefaultRetryBudget); then it fails with store.ErrUnavailable.
	// Negative: no retry at all.
	Budget time.Duration
	// First is the first wait (default DefaultRetryFirst); each next one
	// doubles, up to Max (default DefaultRetryMax).
	First, Max time.Duration
	// After waits d (default time.After); tests inject a fake.
	After func(d time.Duration) <-chan time.Time
	// OnRetry, if set, is told of every transient failure that is about to
	// be retried (logs, metrics, tests).
	OnRetry func(op string, attempt int, err error)
}

func (r RetryOptions) withDefaults() RetryOptions {
	if r.Budget == 0 {
		r.Budget = DefaultRetryBudget
	}
	if r.First <= 0 {
		r.First = DefaultRetryFirst
	}
	if r.Max <= 0 {
		r.Max = DefaultRetryMax
	}
	if r.After == nil {
		r.After = time.After
	}
	if r.OnRetry == nil {
		r.OnRetry = func(string, int, error) {}
	}
	return r
}

// effect says what replaying a call that failed may do.
type effect int

const (
	// readOnly: replayed on any transient failure.
	readOnly effect = iota
	// idempotent: a write keyed so that applying it twice equals applying
	// it once (an upsert of the same value by id, a delete by id, an append
	// deduplicated by its delivery id, a claim by its owner or token):
	// replayed on any transient failure, even one that lost the answer to
	// a COMMIT the server may have applied.
	idempotent
	// once: a write that must not apply twice: replayed only when the
	// failed attempt surely did not apply (nothing was sent, or the
	// transaction failed before its COMMIT, or the server refused it);
	// a lost COMMIT is reported as store.ErrUnavailable (outcome unknown).
	once
)

// do runs attempt until it succeeds, fails for good, or the database has
// been away for longer than the retry budget. It is the one place every
// store call goes through (inTx included), so every caller - turns, the
// outbox, the scheduler, the session registry - waits out a restart or a
// failover of the database the same way.
func (s *Store) do(ctx context.Context, op string, eff effect, attempt func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := s.retry
	var waited time.Duration
	wait := r.First
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Transient(err) {
			return err
		}
		if eff == once && !notApplied(err) {
			return fmt.Errorf("postgres: %s: connection lost before the outcome was known (not replayed: it must not apply twice): %w: %w",
				op, store.ErrUnavailable, err)
		}
		if r.Budget < 0 || waited+wait > r.Budget {
			return fmt.Errorf("postgres: %s: database unavailable (%d attempts over %s): %w: %w",
				op, n, waited, store.ErrUnavailable, err)
		}
		r.OnRetry(op, n, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: %s: %w (while waiting for the database: %v)", op, ctx.Err(), err)
		case <-r.After(wait):
		}
		waited += wait
		wait = min(wait*2, r.Max)
	}
}

// inTx runs fn in a transaction (READ COMMITTED) through do, committing
// when it returns nil. A failure before the COMMIT was sent is marked as
// not applied (the server rolls an unfinished transaction back, also when
// the connection dies), so even a once call is replayed then.
func (s *Store) inTx(ctx context.Context, op string, eff effect, fn func(tx pgx.Tx) error) error {
	return s.do(ctx, op, eff, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return rolledBack{err}
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback(ctx)
			return rolledBack{err}
		}
		return tx.Commit(ctx)
	})
}

// rolledBack marks a failure that surely applied nothing (pgconn's
// SafeToRetry convention, so notApplied sees it through any wrapping).
type rolledBack struct{ err error }

func (e rolledBack) Error() string     { return e.err.Error() }
func (e rolledBack) Unwrap() error     { return e.err }
func (e rolledBack) SafeToRetry() bool { return true }

// notApplied reports whether a failed attempt surely changed nothing:
// nothing reached the server, the transaction failed before its COMMIT, or
// the server answered with an error (a statement that fails is rolled
// back) - except a shutdown or connection error, which may arrive after
// the server applied a COMMIT whose answer was lost.
func notApplied(err error) bool {
	var ce *pgconn.ConnectError
	if pgconn.SafeToRetry(err) || errors.As(err, &ce) {
		return true // nothing reached the server, or no session was ever opened
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return !connectionClass(pg.Code)
	}
	return false
}

// connectionClass: the server is going away or the connection broke
// (class 08 connection exception, 57P01 admin shutdown, 57P02 crash
// shutdown, 57P03 cannot connect now: starting up or shutting down).
func connectionClass(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return len(code) == 5 && code[:2] == "08"
}

// Transient reports whether err means the database is unreachable for a
// while rather than that the call is wrong: a refused, reset or dropped
// connection, a connect that timed out, the server shutting down or
// starting up (57P01-57P03, class 08), too many connections (53300), or a
// transaction the server rolled back for a serialization failure or a
// deadlock (40001, 40P01). A cancelled context, a closed pool (the store
// was closed), a refused login or a bad statement are not transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "53300", "40001", "40P01":
			return true
		}
		return connectionClass(pg.Code)
	}
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	if errors.As(err, new(*pgconn.ConnectError)) {
		return true // dial failures, timeouts, a server that closed the connection while we logged in
	}
	if pgconn.Timeout(err) {
		return true // pgconn's own connect or read timeout (the caller's context is checked first)
	}
	var ne net.Error
	return errors.As(err, &ne)
}
