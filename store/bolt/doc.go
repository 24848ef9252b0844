// Package bolt implements the core store interfaces (binding.Store,
// transcript.Store, delivery.Store) on one go.etcd.io/bbolt file.
//
// Open takes the file's exclusive lock with a timeout; a second process (or
// a second Open in this one) fails with an error wrapping ErrLocked that
// reads "store <path> is locked by another bot process". The parent
// directory is created 0700 and the file is kept at 0600.
//
// Layout (top-level buckets):
//
//	meta                 schemaVersion -> uint64
//	bindings             binding id -> JSON binding.Record
//	transcripts          one nested bucket per session key (see transcript.go)
//	deliveries           delivery id -> JSON delivery.Record
//	deliveries_by_time   createdAt(12 bytes) + id -> state, for newest-first listing
//
// Invariants:
//   - Schema: the meta bucket records the schema version (SchemaVersion).
//     Open runs the pending migrations, in order, in one transaction, and
//     records the new version; a file whose version is newer than the binary
//     is refused with ErrSchemaTooNew and left untouched. New record kinds
//     add a bucket name, a migration creating it and a jsonBucket[T].
//   - Transcripts: per session, seqs are dense from 1 and keyed big-endian so
//     key order is seq order. Append's delivery-id lookup, seq assignment,
//     entry write and index writes share one read-write transaction, so
//     idempotency and ordering are atomic; Append goes through the group
//     committer (commit.go) so concurrent appenders are committed together
//     (fsync per batch; a lone write commits at once, Options.MaxBatchDelay
//     adds a wait). Entries are never rewritten or deleted.
//     PutDelivery and PutSessionInfo, written several times per turn, group
//     commit the same way (the load harness showed one fsync'd transaction
//     each queueing every conversation behind bbolt's one writer).
//   - Tail walks a cursor back from the last key: cost is O(log size + n).
//   - Deliveries: the time index holds exactly one key per record, moved in
//     the same transaction when a replace changes CreatedAt.
//   - Every write is durable when the call returns (bbolt fsyncs on commit).
//   - Records are JSON so a dump is readable and fields can be added without
//     a migration; readers normalise (Entry.MessageIDs never nil).
package bolt
