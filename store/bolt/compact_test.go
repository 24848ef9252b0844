package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/transcript"
)

// TestCompactDropsErasedText: an erased entry's text stays in the file's
// freed pages until Compact, and is gone from the file after it.
func TestCompactDropsErasedText(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte("hunter2-secret-"), 200)
	e, _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: string(secret), MessageIDs: []string{"m1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Erase(ctx, "k", []uint64{e.Seq}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Compact(path, 100*time.Millisecond); err == nil {
		t.Fatal("Compact ran while the store was open")
	}
	s.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("hunter2-secret-")) {
		t.Skip("bbolt already reused the freed pages: nothing for Compact to prove here")
	}
	if _, _, err := Compact(path, time.Second); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("hunter2-secret-")) {
		t.Fatal("the erased text is still in the file after Compact")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after compact = %v", fi.Mode().Perm())
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.ByMessageID(ctx, "k", "m1")
	if err != nil || !ok || !got.Deleted {
		t.Fatalf("after compact: %+v %v %v", got, ok, err)
	}
}

// TestMigrationBackfillsMessageIndex: a store written at schema 2 (no
// cross-session message index) finds its messages by id after Open.
func TestMigrationBackfillsMessageIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bot.db")
	old, err := open(path, Options{}, migrations[:2])
	if err != nil {
		t.Fatal(err)
	}
	// Written as a schema-2 binary did: session buckets and their own index only.
	err = old.db.Update(func(tx *bbolt.Tx) error {
		_, _, err := appendTxV2(tx, "k", transcript.ForStore("k", transcript.Entry{Text: "x", MessageIDs: []string{"m1", "m2"}}))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"m1", "m2"} {
		if key, ok, err := s.LocateMessage(ctx, id); err != nil || !ok || key != "k" {
			t.Fatalf("LocateMessage(%s) after migration = %q %v %v", id, key, ok, err)
		}
	}
}

// appendTxV2 writes an entry the way schema 2 did (no message_sessions bucket).
func appendTxV2(tx *bbolt.Tx, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	ss, _, err := sessionBuckets(tx, key, true)
	if err != nil {
		return e, false, err
	}
	e.Seq = 1
	raw, _ := json.Marshal(e)
	if err := ss.entries.Put(u64(1), raw); err != nil {
		return e, false, err
	}
	for _, id := range e.MessageIDs {
		if err := ss.message.Put([]byte(id), u64(1)); err != nil {
			return e, false, err
		}
	}
	return e, false, ss.b.Put(keyLastSeq, u64(1))
}

// TestOpenWaitingThroughCompactUsesTheNewFile (issue 27.5): a bot that
// opened the store while `bot compact` held its lock gets the lock only
// after compact renamed the fresh file over the path. It must run on that
// file, not on the unlinked old one: what it writes is there after a
// restart.
func TestOpenWaitingThroughCompactUsesTheNewFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: "before", MessageIDs: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// compact's side: it holds the old file's lock while it copies.
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 16)
	type result struct {
		s   *Store
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := open(path, Options{LockTimeout: time.Minute, openFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			opened <- struct{}{}
			return f, err
		}}, migrations)
		got <- result{s, err}
	}()
	select {
	case <-opened: // the bot holds the old file and waits for its lock
	case <-time.After(10 * time.Second):
		t.Fatal("the bot did not open the store file")
	}
	tmp := path + ".compact"
	dst, err := bbolt.Open(tmp, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bbolt.Compact(dst, src, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	src.Close() // the bot gets the old file's lock now
	var r result
	select {
	case r = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the bot's open did not return")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, _, err := r.s.Append(ctx, "k", transcript.Entry{Role: transcript.RoleUser, Text: "after", MessageIDs: []string{"m2"}}); err != nil {
		t.Fatal(err)
	}
	r.s.Close()

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"m1", "m2"} {
		if _, ok, err := s.ByMessageID(ctx, "k", id); err != nil || !ok {
			t.Errorf("message %s is not in the store after the restart (ok=%v err=%v): the bot wrote to the unlinked file", id, ok, err)
		}
	}
}
