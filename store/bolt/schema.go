package bolt

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// Top-level buckets.
var (
	bucketMeta        = []byte("meta")
	bucketBindings    = []byte("bindings")
	bucketTranscripts = []byte("transcripts")
	bucketDeliveries  = []byte("deliveries")
	bucketDelivByTime = []byte("deliveries_by_time")
	bucketJobs        = []byte("jobs")       // job id -> JSON (jobs.go)
	bucketJobRuns     = []byte("job_runs")   // job id -> nested bucket: run id -> JSON
	bucketJobLedger   = []byte("job_ledger") // job id -> newest claimed instant
	bucketSessions    = []byte("sessions")
	bucketWebhooks    = []byte("webhooks")
	bucketMsgSessions = []byte("message_sessions") // Discord message id -> session key (transcript.go)
	bucketProcesses   = []byte("processes")        // host/pgid -> running child process group (procs.go)
	bucketUsage       = []byte("usage")            // time+seq -> model call usage record (usage.go)
	bucketMemChanges  = []byte("memory_changes")   // queued transcript changes for the recall index (changes.go)
	bucketNotes       = []byte("notes")            // note id -> memory note record (notes.go)
	bucketNoteMsgs    = []byte("note_messages")    // message id -> note id (notes.go)

	keySchemaVersion = []byte("schemaVersion")
)

// SchemaVersion is the schema this binary writes: len(migrations).
const SchemaVersion = 7

// A migration moves the schema from version i to i+1, where i is its index
// in migrations. Migrations run in order inside one read-write transaction
// at Open; either all pending ones apply and the version is recorded, or
// none does. Append new migrations; never edit or reorder released ones.
type migration struct {
	name string
	fn   func(tx *bbolt.Tx) error
}

var migrations = []migration{
	{name: "initial buckets", fn: func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketBindings, bucketTranscripts, bucketDeliveries, bucketDelivByTime, bucketSessions, bucketWebhooks} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "scheduler buckets", fn: func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketJobRuns, bucketJobLedger} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "message id index across sessions", fn: backfillMessageSessions},
	{name: "child process groups", fn: func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketProcesses)
		return err
	}},
	{name: "usage records", fn: func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketUsage)
		return err
	}},
	{name: "recall change queue", fn: func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketMemChanges)
		return err
	}},
	{name: "memory notes", fn: func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketNotes, bucketNoteMsgs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}},
}

// schemaVersion reads the recorded version (0 for a new file).
func schemaVersion(tx *bbolt.Tx) uint64 {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0
	}
	v := meta.Get(keySchemaVersion)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func migrate(db *bbolt.DB, path string, migs []migration) error {
	return db.Update(func(tx *bbolt.Tx) error {
		have := schemaVersion(tx)
		want := uint64(len(migs))
		if have > want {
			return fmt.Errorf("store %s has schema version %d but this binary supports up to %d; upgrade the bot: %w",
				path, have, want, ErrSchemaTooNew)
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		for v := have; v < want; v++ {
			m := migs[v]
			if err := m.fn(tx); err != nil {
				return fmt.Errorf("store %s: migration %d (%s): %w", path, v+1, m.name, err)
			}
			if err := meta.Put(keySchemaVersion, u64(v+1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// u64 encodes v big-endian in a fresh slice (bbolt needs values to stay
// valid for the life of the transaction, so slices are never reused).
func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
