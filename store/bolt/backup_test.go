package bolt

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A running bot holds bbolt's exclusive file lock, and bbolt's read-only
// open takes a shared lock: it cannot read the file meanwhile. This is why
// `bot backup` of a running bot goes through the bot (docs/DECISIONS.md).
func TestReadOnlyOpenBlocksWhileTheStoreIsOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, berrors.ErrTimeout) {
		t.Fatalf("read-only open while a writer holds the lock: err = %v, want berrors.ErrTimeout", err)
	}
}

func TestBackupWhileOpenVerifies(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "bot.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutWebhook(context.Background(), "c1", "w1", "tok"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "copy.db")
	if _, err := WriteFile(out, &buf); err != nil {
		t.Fatal(err)
	}
	v, err := Verify(out)
	if err != nil || v != SchemaVersion {
		t.Fatalf("verify = %d, %v; want schema %d", v, err, SchemaVersion)
	}
	c, err := Open(out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if id, tok, ok, err := c.Webhook(context.Background(), "c1"); err != nil || !ok || id != "w1" || tok != "tok" {
		t.Fatalf("webhook in the copy: %q %q %v %v", id, tok, ok, err)
	}
	// Not a store: refused.
	if _, err := WriteFile(filepath.Join(dir, "junk.db"), bytes.NewReader(make([]byte, 8192))); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(filepath.Join(dir, "junk.db")); err == nil {
		t.Fatal("verify of zeros succeeded")
	}
}
