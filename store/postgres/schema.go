package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SchemaVersion is the schema this binary writes: len(migrations).
const SchemaVersion = 8

// migrationLockKey is the pg_advisory_xact_lock key migrations run under, so
// two processes starting together migrate one after the other. It is the
// first 8 bytes of "agentbot" read as a big-endian int64.
const migrationLockKey int64 = 0x6167656e74626f74

// A migration moves the schema from version i to i+1, where i is its index
// in migrations. All pending migrations run in one transaction at Open,
// under an advisory lock; either all apply and the version is recorded, or
// none does. Append new migrations; never edit or reorder released ones.
//
// Identifier columns use COLLATE "C" so ORDER BY is byte order, as in bbolt
// (Jobs ordered by ID, delivery ties broken by ID). Records are JSON in
// bytea columns (JSON text may hold \u0000, which jsonb refuses); the
// columns beside them exist only for lookups and ordering. Times used for
// ordering are (seconds, nanoseconds) pairs: timestamptz keeps microseconds
// only, and the zero time.Time must order before every real one.
type migration struct {
	name string
	sql  string
}

var migrations = []migration{
	{name: "initial schema", sql: `
CREATE TABLE bindings (
	id   text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL
);

CREATE TABLE transcript_sessions (
	session_key text COLLATE "C" PRIMARY KEY,
	last_seq    bigint NOT NULL DEFAULT 0,
	generation  bigint NOT NULL DEFAULT 0
);

CREATE TABLE transcript_entries (
	session_key text COLLATE "C" NOT NULL REFERENCES transcript_sessions (session_key),
	seq         bigint NOT NULL,
	delivery_id text COLLATE "C",
	data        bytea NOT NULL,
	PRIMARY KEY (session_key, seq)
);
CREATE UNIQUE INDEX transcript_entries_delivery ON transcript_entries (session_key, delivery_id)
	WHERE delivery_id IS NOT NULL;

CREATE TABLE transcript_messages (
	session_key text COLLATE "C" NOT NULL,
	message_id  text COLLATE "C" NOT NULL,
	seq         bigint NOT NULL,
	PRIMARY KEY (session_key, message_id),
	FOREIGN KEY (session_key, seq) REFERENCES transcript_entries (session_key, seq)
);

CREATE TABLE deliveries (
	id           text COLLATE "C" PRIMARY KEY,
	state        text NOT NULL,
	created_sec  bigint NOT NULL,
	created_nsec integer NOT NULL,
	data         bytea NOT NULL
);
CREATE INDEX deliveries_by_time ON deliveries (created_sec DESC, created_nsec DESC, id DESC);
CREATE INDEX deliveries_by_state_time ON deliveries (state, created_sec DESC, created_nsec DESC, id DESC);

CREATE TABLE session_infos (
	key  text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL
);

CREATE TABLE webhooks (
	channel_id text COLLATE "C" PRIMARY KEY,
	webhook_id text NOT NULL,
	token      text NOT NULL
);

CREATE TABLE jobs (
	id   text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL
);

CREATE TABLE job_runs (
	job_id       text COLLATE "C" NOT NULL,
	run_id       text COLLATE "C" NOT NULL,
	started_sec  bigint NOT NULL,
	started_nsec integer NOT NULL,
	data         bytea NOT NULL,
	PRIMARY KEY (job_id, run_id)
);
CREATE INDEX job_runs_newest ON job_runs (job_id, started_sec DESC, started_nsec DESC, run_id DESC);

CREATE TABLE job_ledger (
	job_id       text COLLATE "C" PRIMARY KEY,
	instant_sec  bigint NOT NULL,
	instant_nsec integer NOT NULL
);
`},
	{name: "delivery claims", sql: `
ALTER TABLE deliveries ADD COLUMN owner text, ADD COLUMN lease_until timestamptz;
`},
	{name: "message id lookup across sessions", sql: `
CREATE INDEX transcript_messages_by_id ON transcript_messages (message_id);
`},
	{name: "job ledger claim token", sql: `
ALTER TABLE job_ledger ADD COLUMN claim text;
`},
	{name: "child process groups", sql: `
CREATE TABLE processes (
	key  text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL
);
`},
	{name: "usage records", sql: `
CREATE TABLE usage_records (
	id      bigserial PRIMARY KEY,
	at_s    bigint NOT NULL,
	at_ns   integer NOT NULL,
	user_id text COLLATE "C" NOT NULL,
	place   text COLLATE "C" NOT NULL,
	data    bytea NOT NULL
);
CREATE INDEX usage_records_by_time ON usage_records (at_s, at_ns, id);
CREATE INDEX usage_records_by_user ON usage_records (user_id, at_s, at_ns);
CREATE INDEX usage_records_by_place ON usage_records (place, at_s, at_ns);
`},
	{name: "recall index", sql: `
CREATE TABLE memory_changes (
	pos         bigserial PRIMARY KEY,
	session_key text COLLATE "C" NOT NULL,
	seq         bigint NOT NULL
);
CREATE TABLE memory_docs (
	session_key text COLLATE "C" NOT NULL,
	seq         bigint NOT NULL,
	role        text NOT NULL,
	author      text NOT NULL,
	body        text NOT NULL,
	at          timestamptz NOT NULL,
	message_id  text NOT NULL,
	tsv         tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
	PRIMARY KEY (session_key, seq)
);
CREATE INDEX memory_docs_tsv ON memory_docs USING GIN (tsv);
CREATE TABLE memory_state (
	id    integer PRIMARY KEY CHECK (id = 1),
	built boolean NOT NULL
);
`},
	{name: "memory notes", sql: `
CREATE TABLE notes (
	id          text COLLATE "C" PRIMARY KEY,
	scope       text NOT NULL,
	about       text COLLATE "C" NOT NULL,
	conv_key    text COLLATE "C" NOT NULL,
	server      text COLLATE "C" NOT NULL,
	at_s        bigint NOT NULL,
	at_ns       integer NOT NULL,
	message_ids text[] NOT NULL,
	data        bytea NOT NULL
);
CREATE INDEX notes_by_about ON notes (about) WHERE scope = 'me';
CREATE INDEX notes_by_conv ON notes (conv_key) WHERE scope = 'here';
CREATE INDEX notes_by_server ON notes (server) WHERE scope = 'server';
CREATE INDEX notes_by_message ON notes USING GIN (message_ids);
`},
}

// ErrSchemaTooNew: the database was migrated by a newer binary.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// migrate brings the schema up to len(migs) inside one transaction holding
// the migration advisory lock, and returns the version the database is at.
func migrate(ctx context.Context, conn *pgx.Conn, migs []migration) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: begin migration: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
		return 0, fmt.Errorf("postgres: migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	version integer NOT NULL
)`); err != nil {
		return 0, fmt.Errorf("postgres: create schema_version: %w", err)
	}
	have := 0
	err = tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres: read schema version: %w", err)
	}
	want := len(migs)
	if have > want {
		return have, fmt.Errorf("postgres: database has schema version %d but this binary supports up to %d; upgrade the bot: %w",
			have, want, ErrSchemaTooNew)
	}
	if have == want {
		return have, tx.Commit(ctx)
	}
	for v := have; v < want; v++ {
		if _, err := tx.Exec(ctx, migs[v].sql); err != nil {
			return 0, fmt.Errorf("postgres: migration %d (%s): %w", v+1, migs[v].name, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_version (one, version) VALUES (true, $1)
ON CONFLICT (one) DO UPDATE SET version = excluded.version`, want); err != nil {
		return 0, fmt.Errorf("postgres: record schema version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("postgres: commit migrations: %w", err)
	}
	return want, nil
}
