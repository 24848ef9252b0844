package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// DefaultTurnLockConns caps the connections a TurnLocker holds at once.
const DefaultTurnLockConns = 32

// TurnLocker serialises turns of one session across processes with
// session-level advisory locks: Lock takes a connection from its own pool
// (not the store's: a turn holds it while it runs and needs store
// connections meanwhile) and waits in pg_advisory_lock; unlock releases
// the lock and returns the connection. If the connection dies during the
// turn the server drops the lock with it. It implements core/session's
// TurnLocker.
type TurnLocker struct {
	pool *pgxpool.Pool
}

// NewTurnLocker opens the locker's pool (maxConns <= 0: DefaultTurnLockConns)
// on the store's database. Close it after the sessions stopped.
func (s *Store) NewTurnLocker(ctx context.Context, maxConns int32) (*TurnLocker, error) {
	if maxConns <= 0 {
		maxConns = DefaultTurnLockConns
	}
	cfg := s.pool.Config().Copy()
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: turn lock pool: %w", err)
	}
	return &TurnLocker{pool: pool}, nil
}

// Lock blocks until this process holds key's turn lock or ctx ends.
func (l *TurnLocker) Lock(ctx context.Context, key string) (unlock func(), err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: turn lock %s: %w", key, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, turnLockPrefix+key); err != nil {
		// A cancelled wait may leave the lock granted later: drop the connection.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("postgres: turn lock %s: %w", key, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, turnLockPrefix+key).Scan(&ok); err != nil || !ok {
			_ = conn.Conn().Close(ctx) // closing the session frees its locks
		}
		conn.Release()
	}, nil
}

// Close closes the locker's pool.
func (l *TurnLocker) Close() { l.pool.Close() }

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
