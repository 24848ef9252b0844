package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// Advisory lock keys are hashtextextended(name, 0) of these prefixed names,
// so turn locks, the leader lock and the migration lock (a constant) do not
// meet.
const (
	turnLockPrefix = "agentbot:turn:"
	// LeaderLockName names the scheduler leader's advisory lock.
	LeaderLockName = "agentbot:scheduler-leader"
)

// Turn lock polling: how often a Lock whose key another process holds
// tries again (doubling from the first to the max).
const (
	DefaultTurnLockPoll    = 25 * time.Millisecond
	DefaultTurnLockPollMax = 500 * time.Millisecond
)

// TurnLockOptions tunes a TurnLocker. The zero value is valid.
type TurnLockOptions struct {
	// Poll and PollMax: the waits of a Lock whose key another process
	// holds (defaults DefaultTurnLockPoll, DefaultTurnLockPollMax).
	Poll, PollMax time.Duration
	// After waits d (default time.After); tests inject a fake.
	After func(d time.Duration) <-chan time.Time
	Log   zerolog.Logger
}

// TurnLocker serialises turns of one session across processes with
// session-level advisory locks, all held on ONE connection of its own
// (not the store's pool: a turn needs store connections meanwhile). A
// lock never holds a connection of its own, so any number of sessions may
// run slow turns at once without stalling the others (the old design
// pinned one pooled connection per running turn and waited in
// pg_advisory_lock: the 33rd concurrent turn of the process waited, with
// no timeout, for one of 32 slow turns to end). Lock takes the key with
// pg_try_advisory_lock and, while another process holds it, tries again
// with backoff (cross-process contention on one session is rare: shards
// serve disjoint conversations). Within the process a key is held by one
// caller at a time (advisory locks are re-entrant per connection). If the
// connection dies, the server frees every lock on it; the next Lock opens
// a new connection (waiting out a database restart like every store
// call), and the turns that held the old locks finish without them, as a
// turn whose lock connection died always did. It implements core/session's
// TurnLocker.
type TurnLocker struct {
	s   *Store
	opt TurnLockOptions

	mu   sync.Mutex // guards held
	held map[string]chan struct{}

	connMu sync.Mutex // guards conn and serialises its statements
	conn   *pgx.Conn
	epoch  int // counts connections opened: a lock taken on an older one is gone
	closed bool
}

// NewTurnLocker returns the process's turn locker on the store's database.
// It does no I/O: the connection is opened by the first Lock. Close it
// after the sessions stopped.
func (s *Store) NewTurnLocker(opt TurnLockOptions) *TurnLocker {
	if opt.Poll <= 0 {
		opt.Poll = DefaultTurnLockPoll
	}
	if opt.PollMax <= 0 {
		opt.PollMax = DefaultTurnLockPollMax
	}
	if opt.After == nil {
		opt.After = time.After
	}
	return &TurnLocker{s: s, opt: opt, held: map[string]chan struct{}{}}
}

// Lock blocks until this process holds key's turn lock or ctx ends.
func (l *TurnLocker) Lock(ctx context.Context, key string) (unlock func(), err error) {
	// In the process: one holder per key.
	for {
		l.mu.Lock()
		busy, ok := l.held[key]
		if !ok {
			l.held[key] = make(chan struct{})
			l.mu.Unlock()
			break
		}
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: turn lock %s: %w", key, ctx.Err())
		}
	}
	release := func() {
		l.mu.Lock()
		close(l.held[key])
		delete(l.held, key)
		l.mu.Unlock()
	}
	// Across processes.
	wait := l.opt.Poll
	for {
		got, epoch, err := l.try(ctx, key)
		if err != nil {
			release()
			return nil, fmt.Errorf("postgres: turn lock %s: %w", key, err)
		}
		if got {
			var once sync.Once
			return func() { once.Do(func() { l.unlock(key, epoch); release() }) }, nil
		}
		select {
		case <-ctx.Done():
			release()
			return nil, fmt.Errorf("postgres: turn lock %s: %w", key, ctx.Err())
		case <-l.opt.After(wait):
		}
		wait = min(wait*2, l.opt.PollMax)
	}
}

// try takes key's advisory lock on the shared connection if it is free,
// (re)connecting first when needed, through the store's retry loop.
func (l *TurnLocker) try(ctx context.Context, key string) (got bool, epoch int, err error) {
	err = l.s.do(ctx, "turn lock", readOnly, func(ctx context.Context) error {
		l.connMu.Lock()
		defer l.connMu.Unlock()
		if l.closed {
			return errors.New("turn locker closed")
		}
		if l.conn == nil || l.conn.IsClosed() {
			conn, err := pgx.ConnectConfig(ctx, l.s.pool.Config().ConnConfig.Copy())
			if err != nil {
				return err
			}
			if l.conn != nil {
				l.opt.Log.Warn().Msg("turn lock connection lost: the turns that held locks finish without them")
			}
			l.conn, l.epoch = conn, l.epoch+1
		}
		epoch = l.epoch
		err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, turnLockPrefix+key).Scan(&got)
		if err != nil {
			// A cancelled or failed statement may leave the connection (and
			// a lock granted in the meantime) in doubt: start over.
			_ = l.conn.Close(context.Background())
			l.conn = nil
		}
		return err
	})
	return got, epoch, err
}

// unlock releases key's advisory lock if it is still held on the
// connection it was taken on (a lost connection freed it already).
func (l *TurnLocker) unlock(key string, epoch int) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn == nil || l.epoch != epoch || l.conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ok bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, turnLockPrefix+key).Scan(&ok); err != nil || !ok {
		// In doubt: closing the session frees its locks (and every other
		// turn's lock of this process: they finish without theirs).
		l.opt.Log.Warn().Err(err).Str("session", key).Msg("turn unlock failed; closing the turn lock connection")
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}

// Close closes the locker's connection (freeing its locks).
func (l *TurnLocker) Close() {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.closed = true
	if l.conn != nil {
		_ = l.conn.Close(context.Background())
		l.conn = nil
	}
}

// DefaultLeaderRetry is how often a Leader that is not leading tries again,
// and how often the leader checks its connection.
const DefaultLeaderRetry = 3 * time.Second

// LeaderOptions tunes a Leader. The zero value is valid.
type LeaderOptions struct {
	// Name is the advisory lock's name (default LeaderLockName).
	Name string
	// Retry is the acquisition retry and connection check interval
	// (default DefaultLeaderRetry): a dead leader is replaced within about
	// 2.5 Retry once the server notices its connection is gone (one Retry
	// to try again, 1.5 Retry to let the old leader notice and stop).
	Retry time.Duration
	// OnChange, if set, is told when this process becomes (true) or stops
	// being (false) the leader (metrics, logs).
	OnChange func(leading bool)
	Log      zerolog.Logger
}

// Leader elects one process among those sharing the database: the one
// holding a session-level advisory lock on its own dedicated connection.
type Leader struct {
	s   *Store
	opt LeaderOptions
}

// NewLeader returns a leader election; it does no I/O until Run.
func (s *Store) NewLeader(opt LeaderOptions) *Leader {
	if opt.Name == "" {
		opt.Name = LeaderLockName
	}
	if opt.Retry <= 0 {
		opt.Retry = DefaultLeaderRetry
	}
	if opt.OnChange == nil {
		opt.OnChange = func(bool) {}
	}
	return &Leader{s: s, opt: opt}
}

// Run runs fn while this process leads, until ctx ends. It tries to take
// the lock every Retry; once taken it runs fn with a context that is
// cancelled when ctx ends or the lock's connection fails (checked every
// Retry), waits for fn, and gives the lock up. fn returning an error
// (while ctx lives) gives up leadership and tries again after Retry; fn
// returning nil ends Run.
func (l *Leader) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		done, err := l.term(ctx, fn)
		if ctx.Err() != nil || done {
			return nil
		}
		if err != nil {
			l.opt.Log.Warn().Err(err).Msg("leader: lost or not acquired")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.opt.Retry):
		}
	}
}

// term is one attempt: connect, try the lock, lead until fn ends or the
// connection fails. done reports fn returning nil.
func (l *Leader) term(ctx context.Context, fn func(context.Context) error) (done bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing frees the lock too
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, l.opt.Name).Scan(&got); err != nil {
		return false, fmt.Errorf("try lock: %w", err)
	}
	if !got {
		return false, nil
	}
	// Settle before leading: when the previous leader's connection died,
	// the server freed the lock at once, but that process notices only at
	// its next check (every Retry) and stops its work then. Waiting a bit
	// longer than one check keeps two leaders from running side by side
	// (the instant ledger still guards against a frozen old leader).
	select {
	case <-ctx.Done():
		return true, nil
	case <-time.After(l.opt.Retry + l.opt.Retry/2):
	}
	l.opt.Log.Info().Str("lock", l.opt.Name).Msg("leader: this process leads")
	l.opt.OnChange(true)
	defer l.opt.OnChange(false)

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- fn(fctx) }()
	t := time.NewTicker(l.opt.Retry)
	defer t.Stop()
	for {
		select {
		case err := <-res:
			if ctx.Err() == nil {
				uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_, _ = conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, l.opt.Name)
				ucancel()
			}
			if err != nil {
				return false, fmt.Errorf("leader function: %w", err)
			}
			return true, nil
		case <-ctx.Done():
			<-res
			return true, nil
		case <-t.C:
			pctx, pcancel := context.WithTimeout(ctx, l.opt.Retry)
			perr := conn.Ping(pctx)
			pcancel()
			if perr != nil && ctx.Err() == nil {
				l.opt.Log.Error().Err(perr).Msg("leader: lock connection lost; stopping the led work")
				cancel()
				<-res
				return false, fmt.Errorf("lock connection: %w", perr)
			}
		}
	}
}
