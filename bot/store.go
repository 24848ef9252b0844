package bot

import (
	"context"
	"fmt"
	modelusage "github.com/agentbot/agentbot/core/usage"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/postgres"
)

// Store is every store interface the bot's components consume, served
// by one value: the bbolt file (default) or, later, PostgreSQL.
type Store interface {
	binding.Store
	transcript.Store
	delivery.Store
	session.Store
	scheduler.Store
	procs.Store
	modelusage.Store
	memory.Feed // transcript changes for the recall index (memory.go)
	notes.Store // memory's notes (notes.go)
	PutWebhook(ctx context.Context, channelID, id, token string) error
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	DeleteWebhook(ctx context.Context, channelID string) error
	Close() error
}

var _ Store = (*bolt.Store)(nil)

var _ Store = (*postgres.Store)(nil)

// OpenStore opens the configured store. lockWait bounds how long a bbolt
// file locked by another process is waited for (then bolt.ErrLocked).
// On PostgreSQL several bot processes may share one database (see
// cluster.go: binding notices, turn locks, delivery claims, one scheduler
// leader).
func OpenStore(ctx context.Context, cfg config.StoreConfig, lockWait time.Duration) (Store, error) {
	switch cfg.Driver {
	case "", "bolt":
		return bolt.Open(cfg.Path, bolt.Options{LockTimeout: lockWait})
	case "postgres":
		st, err := postgres.Open(ctx, cfg.DSN, postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("store.dsn: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("store.driver %q: %w", cfg.Driver, config.ErrInvalid)
}

// StoreLabel names a store for people: its kind, place and schema.
func StoreLabel(cfg config.StoreConfig, st Store) string {
	switch s := st.(type) {
	case *bolt.Store:
		return fmt.Sprintf("bbolt file %s (schema %d)", s.Path(), bolt.SchemaVersion)
	case *postgres.Store:
		return fmt.Sprintf("PostgreSQL (schema %d)", s.SchemaVersion())
	}
	return cfg.Driver
}
