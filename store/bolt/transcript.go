package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/transcript"
)

// Transcript layout: bucketTranscripts holds one nested bucket per session
// key; each holds
//
//	e    entries: big-endian uint64 seq -> JSON Entry (appended in key order)
//	d    delivery-id index: delivery id -> seq
//	m    message-id index: Discord message id -> seq (first entry wins)
//	seq  last assigned seq (uint64)
//	gen  current generation (int64)
//
// Append's dedupe lookup, seq assignment and index writes happen in one
// read-write transaction, run through the group committer so concurrent appenders share
// one commit (group commit).
var (
	subEntries  = []byte("e")
	subDelivery = []byte("d")
	subMessage  = []byte("m")
	keyLastSeq  = []byte("seq")
	keyGen      = []byte("gen")
)

type txSession struct {
	b, entries, delivery, message *bbolt.Bucket
}

// sessionBuckets returns the session's buckets, creating them if create is
// set; ok is false when the session does not exist and create is unset.
func sessionBuckets(tx *bbolt.Tx, key string, create bool) (txSession, bool, error) {
	root := tx.Bucket(bucketTranscripts)
	if root == nil {
		return txSession{}, false, fmt.Errorf("bolt: bucket %q missing", bucketTranscripts)
	}
	var s txSession
	if !create {
		s.b = root.Bucket([]byte(key))
		if s.b == nil {
			return txSession{}, false, nil
		}
		s.entries, s.delivery, s.message = s.b.Bucket(subEntries), s.b.Bucket(subDelivery), s.b.Bucket(subMessage)
		if s.entries == nil || s.delivery == nil || s.message == nil {
			return txSession{}, false, fmt.Errorf("bolt: session %q is missing sub-buckets", key)
		}
		return s, true, nil
	}
	var err error
	if s.b, err = root.CreateBucketIfNotExists([]byte(key)); err != nil {
		return txSession{}, false, fmt.Errorf("bolt: session %q: %w", key, err)
	}
	if s.entries, err = s.b.CreateBucketIfNotExists(subEntries); err != nil {
		return txSession{}, false, err
	}
	if s.delivery, err = s.b.CreateBucketIfNotExists(subDelivery); err != nil {
		return txSession{}, false, err
	}
	if s.message, err = s.b.CreateBucketIfNotExists(subMessage); err != nil {
		return txSession{}, false, err
	}
	// Seqs only grow, so entries pages can be packed full.
	s.entries.FillPercent = 1.0
	return s, true, nil
}

func decodeEntry(k, raw []byte) (transcript.Entry, error) {
	var e transcript.Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, fmt.Errorf("bolt: decode transcript entry %d: %w", getU64(k), err)
	}
	e.Seq = getU64(k)
	if e.MessageIDs == nil {
		e.MessageIDs = []string{}
	}
	return e, nil
}

func (s txSession) entry(seqKey []byte) (transcript.Entry, bool, error) {
	raw := s.entries.Get(seqKey)
	if raw == nil {
		return transcript.Entry{}, false, nil
	}
	e, err := decodeEntry(seqKey, raw)
	return e, err == nil, err
}

// Append stores e with the next seq of session key, or returns the existing
// entry with existed=true when e.DeliveryID is already present there.
func (s *Store) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return transcript.Entry{}, false, err
	}
	if key == "" {
		return transcript.Entry{}, false, errors.New("bolt: empty session key")
	}
	calls, err := encodeUsage(e.Calls)
	if err != nil {
		return transcript.Entry{}, false, err
	}
	e = transcript.ForStore(key, e)
	var (
		out     transcript.Entry
		existed bool
	)
	// Batch may run fn more than once; it sets out and existed afresh each time.
	err = s.commit.do(func(tx *bbolt.Tx) error {
		var err error
		if out, existed, err = appendTx(tx, key, e); err != nil || existed {
			return err
		}
		// The usage records of the calls behind the entry: same
		// transaction, no commit of their own.
		return putUsage(tx, calls)
	})
	if err != nil {
		return transcript.Entry{}, false, err
	}
	return out, existed, nil
}

// appendTx is Append inside a read-write transaction: dedupe on the
// delivery id, assign the next seq, write the entry and its index keys. e
// must already be normalised (SessionKey set, MessageIDs non-nil).
func appendTx(tx *bbolt.Tx, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	ss, _, err := sessionBuckets(tx, key, true)
	if err != nil {
		return transcript.Entry{}, false, err
	}
	if e.DeliveryID != "" {
		if seqKey := ss.delivery.Get([]byte(e.DeliveryID)); seqKey != nil {
			got, ok, err := ss.entry(seqKey)
			if err != nil {
				return transcript.Entry{}, false, err
			}
			if !ok {
				return transcript.Entry{}, false, fmt.Errorf("bolt: session %q: delivery index names missing seq %d", key, getU64(seqKey))
			}
			return got, true, nil
		}
	}
	e.Seq = getU64(ss.b.Get(keyLastSeq)) + 1
	raw, err := json.Marshal(e)
	if err != nil {
		return transcript.Entry{}, false, fmt.Errorf("bolt: encode transcript entry: %w", err)
	}
	seqKey := u64(e.Seq)
	if err := ss.entries.Put(seqKey, raw); err != nil {
		return transcript.Entry{}, false, err
	}
	if err := ss.b.Put(keyLastSeq, seqKey); err != nil {
		return transcript.Entry{}, false, err
	}
	if err := queueChange(tx, key, e.Seq); err != nil {
		return transcript.Entry{}, false, err
	}
	if e.DeliveryID != "" {
		if err := ss.delivery.Put([]byte(e.DeliveryID), seqKey); err != nil {
			return transcript.Entry{}, false, err
		}
	}
	for _, id := range e.MessageIDs {
		if id == "" || ss.message.Get([]byte(id)) != nil {
			continue
		}
		if err := ss.message.Put([]byte(id), seqKey); err != nil {
			return transcript.Entry{}, false, err
		}
		if err := putMessageSession(tx, id, key); err != nil {
			return transcript.Entry{}, false, err
		}
	}
	return e, false, nil
}

// Tail returns up to n of the newest entries, oldest first. It walks a
// cursor back from the last key, so its cost does not depend on the size of
// the session.
func (s *Store) Tail(ctx context.Context, key string, n int) ([]transcript.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []transcript.Entry{}
	if n <= 0 {
		return out, nil
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		ss, ok, err := sessionBuckets(tx, key, false)
		if err != nil || !ok {
			return err
		}
		c := ss.entries.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			e, err := decodeEntry(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// Range returns up to limit entries with Seq >= from, oldest first
// (limit <= 0: no limit).
func (s *Store) Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []transcript.Entry{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		ss, ok, err := sessionBuckets(tx, key, false)
		if err != nil || !ok {
			return err
		}
		c := ss.entries.Cursor()
		for k, v := c.Seek(u64(max(from, 1))); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			e, err := decodeEntry(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ByMessageID finds the entry of session key holding messageID.
func (s *Store) ByMessageID(ctx context.Context, key, messageID string) (transcript.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return transcript.Entry{}, false, err
	}
	if messageID == "" {
		return transcript.Entry{}, false, nil
	}
	var (
		out   transcript.Entry
		found bool
	)
	err := s.db.View(func(tx *bbolt.Tx) error {
		ss, ok, err := sessionBuckets(tx, key, false)
		if err != nil || !ok {
			return err
		}
		seqKey := ss.message.Get([]byte(messageID))
		if seqKey == nil {
			return nil
		}
		out, found, err = ss.entry(seqKey)
		return err
	})
	if err != nil {
		return transcript.Entry{}, false, err
	}
	return out, found, nil
}

// Generation returns the session's generation (0 if never set).
func (s *Store) Generation(ctx context.Context, key string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var gen int
	err := s.db.View(func(tx *bbolt.Tx) error {
		ss, ok, err := sessionBuckets(tx, key, false)
		if err != nil || !ok {
			return err
		}
		gen = int(int64(getU64(ss.b.Get(keyGen))))
		return nil
	})
	return gen, err
}

// SetGeneration records gen as the session's current generation, creating
// the session if needed.
func (s *Store) SetGeneration(ctx context.Context, key string, gen int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if key == "" {
		return errors.New("bolt: empty session key")
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		ss, _, err := sessionBuckets(tx, key, true)
		if err != nil {
			return err
		}
		return ss.b.Put(keyGen, u64(uint64(int64(gen))))
	})
}

// Sessions lists the session keys that have a transcript, in key order.
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []string{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketTranscripts)
		if root == nil {
			return fmt.Errorf("bolt: bucket %q missing", bucketTranscripts)
		}
		return root.ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putMessageSession records, once, which session first held a message id.
func putMessageSession(tx *bbolt.Tx, messageID, key string) error {
	idx := tx.Bucket(bucketMsgSessions)
	if idx == nil {
		return fmt.Errorf("bolt: bucket %q missing", bucketMsgSessions)
	}
	if idx.Get([]byte(messageID)) != nil {
		return nil
	}
	return idx.Put([]byte(messageID), []byte(key))
}

// backfillMessageSessions is migration 3: the cross-session message index,
// built from every session's own message index.
func backfillMessageSessions(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketMsgSessions); err != nil {
		return err
	}
	root := tx.Bucket(bucketTranscripts)
	if root == nil {
		return nil
	}
	return root.ForEachBucket(func(k []byte) error {
		ss, ok, err := sessionBuckets(tx, string(k), false)
		if err != nil || !ok {
			return err
		}
		return ss.message.ForEach(func(id, _ []byte) error { return putMessageSession(tx, string(id), string(k)) })
	})
}

// LocateMessage finds the session that first recorded messageID.
func (s *Store) LocateMessage(ctx context.Context, messageID string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	var key string
	err := s.db.View(func(tx *bbolt.Tx) error {
		idx := tx.Bucket(bucketMsgSessions)
		if idx == nil {
			return fmt.Errorf("bolt: bucket %q missing", bucketMsgSessions)
		}
		key = string(idx.Get([]byte(messageID)))
		return nil
	})
	if err != nil {
		return "", false, err
	}
	return key, key != "", nil
}

// Erase rewrites entries seqs of session key with empty text and Deleted
// set, in one transaction. The entry keeps its seq, message ids and
// delivery id (it stays as a marker). Freed pages keep the old bytes until
// bbolt reuses them: `bot compact` writes a copy without them.
func (s *Store) Erase(ctx context.Context, key string, seqs []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		ss, ok, err := sessionBuckets(tx, key, false)
		if err != nil || !ok {
			return err
		}
		for _, seq := range seqs {
			seqKey := u64(seq)
			e, ok, err := ss.entry(seqKey)
			if err != nil {
				return err
			}
			if !ok || (e.Deleted && e.Text == "") {
				continue
			}
			e.Text, e.Deleted = "", true
			raw, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("bolt: encode transcript entry: %w", err)
			}
			if err := ss.entries.Put(seqKey, raw); err != nil {
				return err
			}
			if err := queueChange(tx, key, seq); err != nil {
				return err
			}
		}
		return nil
	})
}
