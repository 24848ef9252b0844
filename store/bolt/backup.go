package bolt

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
)

// WriteTo writes a consistent copy of the whole store to w: one read
// transaction (bbolt's Tx.WriteTo), so writers go on meanwhile and the copy
// is the state at one instant.
func (s *Store) WriteTo(w io.Writer) (n int64, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store %s: backup: %w", s.path, err)
	}
	return n, nil
}

// WriteFile writes a backup from r to path atomically: a temporary file
// (0600) in the same directory, synced, renamed over path, the directory
// synced. If the process dies on the way, path is the old file or the
// new one, never a torn one (a stray *.tmp may remain).
func WriteFile(path string, r io.Reader) (n int64, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("backup %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("backup %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return 0, fmt.Errorf("backup %s: %w", path, err)
	}
	if n, err = io.Copy(f, r); err != nil {
		return n, fmt.Errorf("backup %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return n, fmt.Errorf("backup %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return n, fmt.Errorf("backup %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return n, fmt.Errorf("backup %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return n, nil
}

// Verify opens a backup read-only (it is never migrated or changed) and
// checks every page; it returns the schema version the copy holds.
func Verify(path string) (schema uint64, err error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("verify %s: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%d consistency error(s): %w", len(errs), errors.Join(errs...))
		}
		schema = schemaVersion(tx)
		if schema == 0 {
			return errors.New("no schema version: not an agentbot store")
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("verify %s: %w", path, err)
	}
	return schema, nil
}
