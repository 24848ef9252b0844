// Package postgres implements the core store interfaces (binding.Store,
// transcript.Store, delivery.Store, session.Store, scheduler.Store) and the
// Discord adapter's webhook credentials on PostgreSQL through
// github.com/jackc/pgx/v5, so several bot processes (gateway shards, a
// standby) can share one state. It is the multi-process counterpart of
// store/bolt and passes the same conformance suites.
//
// Open(ctx, dsn, opts) connects a pgxpool and migrates the schema. Close
// closes the pool.
//
// Tables (schema.go):
//
//	schema_version       one row: the schema version
//	bindings             id -> JSON binding.Record
//	transcript_sessions  session_key -> last_seq, generation
//	transcript_entries   (session_key, seq) -> delivery_id, JSON transcript.Entry
//	transcript_messages  (session_key, message_id) -> seq
//	deliveries           id -> state, created (sec, nsec), JSON delivery.Record
//	session_infos        key -> JSON session.Info
//	webhooks             channel_id -> webhook id, token
//	jobs                 id -> JSON scheduler.Job
//	job_runs             (job_id, run_id) -> started (sec, nsec), JSON scheduler.Run
//	job_ledger           job_id -> newest claimed instant (sec, nsec)
//
// Invariants:
//
//   - Schema: the pending migrations (embedded in the binary, see
//     migrations) run at Open in one transaction holding
//     pg_advisory_xact_lock(migrationLockKey), so processes starting
//     together migrate one after the other and the second sees the work of
//     the first. A database at a version newer than SchemaVersion is refused
//     with ErrSchemaTooNew and left untouched. Released migrations are never
//     edited; new ones are appended.
//
//   - Transcripts: per session, seqs are dense from 1. Append upserts and
//     row-locks the session's transcript_sessions row first, then looks the
//     delivery id up, assigns last_seq+1 and writes the entry, its message
//     ids and the new last_seq in the same transaction. Every appender of a
//     session, in any process, serialises on that row, so the dedupe and the
//     seq are atomic across processes; a unique index on
//     (session_key, delivery_id) backs the dedupe. A duplicate delivery id
//     returns the stored entry (existed=true) and consumes no seq. Entries
//     are never updated or deleted (append-only, DESIGN §3 rule 9); the
//     first entry naming a message id keeps it.
//
//   - Scheduler: ClaimInstant is one conditional upsert on the job's ledger
//     row (update only when the new instant is later), so concurrent claims
//     of one instant from any number of processes have exactly one winner,
//     and an instant at or before the newest claimed one is refused.
//     DeleteJob and PutRun (with its retention pruning) are transactions.
//
//   - Records are JSON in bytea columns (JSON text may contain \u0000,
//     which jsonb refuses), so a record round-trips exactly as in bbolt,
//     nanosecond times included; the other columns only index and order.
//     Readers normalise as bbolt does (Entry.MessageIDs never nil; empty
//     Meta/Metadata stored as absent).
//
//   - Ordering matches bbolt byte order: identifier columns are
//     COLLATE "C"; times used for ordering are (Unix seconds, nanoseconds)
//     pairs, since timestamptz keeps microseconds only and the zero time
//     must sort first.
//
//   - Every write is committed when the call returns; nothing is cached in
//     the process, so another process sees it on its next read.
//
//   - Deliveries: owner and lease_until (schema 2) hold ClaimDelivery's
//     claims (delivery.Claimer): one conditional UPDATE, so of processes
//     claiming one delivery exactly one wins until its lease runs out.
//     PutDelivery leaves the claim alone.
//
// Several processes (issue 9). Each process keeps its routing index in
// memory (core/binding.Service) and serves it from there; the database
// keeps them coherent:
//   - Bindings: PutBindings sends pg_notify(BindingsChannel, id) per record
//     in its transaction. A Listener (one dedicated connection, LISTEN)
//     hands the ids to binding.Service.Refresh, which reads them back
//     (BindingsByID) and applies them without writing; after every
//     (re)connect and every Resync (30s) it re-reads everything, so a lost
//     notice costs at most one Resync. Activity (Touch) reaches the store
//     through Flush, so the bot flushes every second on PostgreSQL.
//   - Turns: TurnLocker takes pg_try_advisory_lock(hashtextextended(
//     "agentbot:turn:"+session key, 0)) on ONE dedicated connection that
//     holds every turn lock of the process (trying again with backoff while
//     another process holds the key; one holder per key in the process),
//     held for the turn; core/session runs every queued task of a session
//     under it, so one turn at a time per session across processes. A
//     process that dies drops its locks with its connection.
//
// The database may go away (a restart, a failover): every call goes
// through Store.do (retry.go), which retries transient failures with
// bounded backoff (Options.Retry, 30 s by default) and then fails with
// store.ErrUnavailable. Writes are replayed after a lost COMMIT only when
// idempotent by key (see the effect constants); the others fail with
// store.ErrUnavailable then. Transcript generations are ordered here too:
// Append stamps the generation under the session row lock and
// ResetGeneration increments it atomically (transcript.Resetter).
//   - Scheduler: Leader holds pg_try_advisory_lock of LeaderLockName on a
//     dedicated connection, runs the led function only while it holds it,
//     pings the connection every Retry (3s) and cancels the function when
//     it fails; the others retry every Retry, so a dead leader is replaced
//     within a few seconds of the server noticing its connection is gone
//     (at once when the process exits; after TCP keepalive when its host
//     vanishes). The job ledger (ClaimInstant) keeps an instant from
//     running twice even across a takeover.
//   - Outbox: Outbound claims each delivery before sending; a process
//     recovering the outbox skips deliveries another process holds, and
//     the leader finishes those whose claim ran out (their owner died).
package postgres
