package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// Defaults for ListenerOptions.
const (
	DefaultResyncInterval = 30 * time.Second
	DefaultRetryInterval  = time.Second
)

// RefreshFunc applies changed binding ids to a process's memory; with no
// ids everything is re-read. binding.Service.Refresh is one.
type RefreshFunc func(ctx context.Context, ids ...string) error

// ListenerOptions tunes a Listener. The zero value is valid.
type ListenerOptions struct {
	// Resync is the period of the full re-read that catches notices lost
	// while disconnected or dropped (default 30s).
	Resync time.Duration
	// Retry is the wait before reconnecting after an error (default 1s).
	Retry time.Duration
	Log   zerolog.Logger
}

// Listener keeps a process's binding index coherent with the other
// processes': on a dedicated connection (not from the pool) it LISTENs on
// BindingsChannel and hands the ids of changed records to a RefreshFunc,
// batched as they arrive. After every (re)connect and every Resync it asks
// for a full re-read, so a notice missed while disconnected costs at most
// one Resync of staleness. Errors reconnect after Retry; Run returns when
// ctx ends.
type Listener struct {
	s       *Store
	refresh RefreshFunc
	opt     ListenerOptions
	// listening, if set, is called each time LISTEN is in place (tests).
	listening func()
}

// NewListener returns a listener calling refresh; it does no I/O until Run.
func (s *Store) NewListener(refresh RefreshFunc, opt ListenerOptions) *Listener {
	if opt.Resync <= 0 {
		opt.Resync = DefaultResyncInterval
	}
	if opt.Retry <= 0 {
		opt.Retry = DefaultRetryInterval
	}
	return &Listener{s: s, refresh: refresh, opt: opt}
}

// Run listens until ctx ends.
func (l *Listener) Run(ctx context.Context) error {
	for {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		l.opt.Log.Warn().Err(err).Dur("retry", l.opt.Retry).Msg("binding change listener: reconnecting")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.opt.Retry):
		}
	}
}

// session is one connection's life: LISTEN, full re-read, then notices.
func (l *Listener) session(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // best effort
	if _, err := conn.Exec(ctx, `LISTEN `+BindingsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if l.listening != nil {
		l.listening()
	}
	for {
		// Everything changed while no notice could reach us (first
		// connect, reconnect) or one may have been lost: re-read all.
		if err := l.refresh(ctx); err != nil && ctx.Err() == nil {
			l.opt.Log.Warn().Err(err).Msg("binding change listener: full re-read")
		}
		if err := l.wait(ctx, conn); err != nil {
			return err
		}
	}
}

// wait hands notices to refresh until the next resync is due (nil) or the
// connection fails.
func (l *Listener) wait(ctx context.Context, conn *pgx.Conn) error {
	deadline := time.Now().Add(l.opt.Resync)
	for {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wctx.Err() != nil && !conn.IsClosed() {
				return nil // resync due
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		ids := []string{n.Payload}
		// Batch what has arrived with it (a rebind notifies two ids).
		for len(ids) < 256 {
			bctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			n, err := conn.WaitForNotification(bctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if bctx.Err() == nil || conn.IsClosed() {
					return fmt.Errorf("wait for notification: %w", err)
				}
				break
			}
			ids = append(ids, n.Payload)
		}
		if err := l.refresh(ctx, ids...); err != nil && ctx.Err() == nil {
			// The rows stay stale until the next full re-read.
			l.opt.Log.Warn().Err(err).Strs("bindings", ids).Msg("binding change listener: refresh")
		}
	}
}
