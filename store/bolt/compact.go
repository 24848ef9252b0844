package bolt

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Compact rewrites the store at path into a fresh file holding only live
// records, then renames it over path. bbolt keeps freed pages (the old
// bytes of erased or rewritten records, such as a deleted message's text)
// in the file until it reuses them; after Compact they are gone from it.
// It needs the store's lock (the bot stopped): ErrLocked otherwise. A crash
// leaves either the old file or the new one at path (rename is atomic),
// and at worst a stray path+".compact", which the next Compact replaces.
func Compact(path string, lockTimeout time.Duration) (before, after int64, err error) {
	if lockTimeout <= 0 {
		lockTimeout = DefaultLockTimeout
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	src, err := openLocked(path, bbolt.Options{Timeout: lockTimeout}, nil)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return 0, 0, &lockedError{path: path}
		}
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, fmt.Errorf("compact %s: remove stale %s: %w", path, tmp, err)
	}
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: create %s: %w", path, tmp, err)
	}
	if err := bbolt.Compact(dst, src, 64<<20); err != nil {
		dst.Close()
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: sync: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: close copy: %w", path, err)
	}
	// The rename happens while src still holds the old file's lock: a bot
	// that opened the old file meanwhile gets its lock only now, finds the
	// file at path is another one and opens that (openLocked).
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: replace: %w", path, err)
	}
	nfi, err := os.Stat(path)
	if err != nil {
		return fi.Size(), 0, fmt.Errorf("compact %s: %w", path, err)
	}
	return fi.Size(), nfi.Size(), nil
}
