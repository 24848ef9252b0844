package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	sess "github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	secret "github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/scheduler"
)

// Compile-time guards: the interfaces the core and the scheduler declare,
// and the webhook credentials the Discord adapter keeps (its WebhookStore,
// restated here so this package does not import the adapter).
var (
	_ binding.Store    = (*Store)(nil)
	_ transcript.Store = (*Store)(nil)
	_ delivery.Store   = (*Store)(nil)
	_ sess.Store       = (*Store)(nil)
	_ scheduler.Store  = (*Store)(nil)
	_ webhookStore     = (*Store)(nil)

	_ binding.ByIDStore = (*Store)(nil)
)

type webhookStore interface {
	PutWebhook(ctx context.Context, channelID, id, token string) error
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	DeleteWebhook(ctx context.Context, channelID string) error
}

// Defaults for Options.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxConns       = 8
)

// Options tunes Open. The zero value is valid.
type Options struct {
	// ConnectTimeout bounds connecting and migrating at Open (default 10s).
	ConnectTimeout time.Duration
	// MaxConns caps the pool (default 8). A DSN's pool_max_conns wins when
	// Options.MaxConns is zero.
	MaxConns int32
	// Retry tunes how every store call waits out a restart or failover of
	// the database (bounded backoff, then store.ErrUnavailable).
	Retry RetryOptions
}

// Store is one PostgreSQL database holding every core store's tables. It
// implements binding.Store, transcript.Store, delivery.Store, session.Store,
// scheduler.Store and the adapter's webhook credentials, and is safe for
// concurrent use by any number of goroutines and processes.
type Store struct {
	pool      *pgxpool.Pool
	version   int
	retry     RetryOptions
	closeOnce sync.Once
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string), runs the pending schema migrations and returns the
// store. A database migrated by a newer binary is refused with an error
// wrapping ErrSchemaTooNew and left untouched.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	return open(ctx, dsn, opts, migrations)
}

func open(ctx context.Context, dsn string, opts Options, migs []migration) (*Store, error) {
	if dsn == "" {
		return nil, errors.New("postgres: empty dsn")
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN with its password; say less.
		return nil, errors.New("postgres: invalid dsn (expected postgres://user:pass@host:port/db or key=value pairs)")
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect %s: %w", redact(cfg), secret.Error(err, cfg.ConnConfig.Password))
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect %s: %w", redact(cfg), secret.Error(err, cfg.ConnConfig.Password))
	}
	version, err := migrate(ctx, conn.Conn(), migs)
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, version: version, retry: opts.Retry.withDefaults()}, nil
}

// redact names the server without credentials, for error messages (the
// driver's error itself passes through internal/redact with the password).
func redact(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("host=%s port=%d database=%s user=%s", c.Host, c.Port, c.Database, c.User)
}

// SchemaVersion is the schema version the database is at (equal to the
// package's SchemaVersion once Open has returned).
func (s *Store) SchemaVersion() int { return s.version }

// Pool is the underlying connection pool, for callers that need more than
// the store interfaces (a later scheduler leader lock, LISTEN/NOTIFY).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool. Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}
