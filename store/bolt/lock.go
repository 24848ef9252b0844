package bolt

import (
	"fmt"
	"os"

	"go.etcd.io/bbolt"
)

// maxReplacedRetries bounds how often openLocked starts again because the
// file at path was replaced while it waited for the lock.
const maxReplacedRetries = 8

// openLocked opens path with bbolt, which waits (up to opts.Timeout) for
// the file's lock, and then makes sure the file it locked is still the
// one at path. `bot compact` holds the old file's lock while it renames a
// fresh file over path: a process that opened the old file meanwhile gets
// its lock only after the swap, on an unlinked inode, and everything it
// wrote there would be gone at its next start (issue 27.5). Such a handle
// is closed and path opened again. openFile is bbolt's file opener (nil:
// os.OpenFile; tests observe the open with it).
func openLocked(path string, opts bbolt.Options, openFile func(string, int, os.FileMode) (*os.File, error)) (*bbolt.DB, error) {
	if openFile == nil {
		openFile = os.OpenFile
	}
	for range maxReplacedRetries {
		var f *os.File
		opts.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
			file, err := openFile(name, flag, perm)
			f = file
			return file, err
		}
		db, err := bbolt.Open(path, 0o600, &opts)
		if err != nil {
			return nil, err
		}
		same, err := samePath(f, path)
		if err != nil {
			db.Close()
			return nil, err
		}
		if same {
			return db, nil
		}
		db.Close() // replaced while we waited: the new file is the store
	}
	return nil, fmt.Errorf("%s was replaced %d times while waiting for its lock", path, maxReplacedRetries)
}

// samePath reports whether the open file f is the file now at path.
func samePath(f *os.File, path string) (bool, error) {
	if f == nil {
		return false, fmt.Errorf("%s: bbolt opened no file", path)
	}
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat locked %s: %w", path, err)
	}
	now, err := os.Stat(path)
	if os.IsNotExist(err) {
		return false, nil // removed after the open: open (create) it again
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	return os.SameFile(held, now), nil
}
