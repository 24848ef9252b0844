package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Compile-time guards.
var (
	_ binding.Store    = (*Store)(nil)
	_ transcript.Store = (*Store)(nil)
	_ delivery.Store   = (*Store)(nil)
)

// Errors.
var (
	// ErrLocked: another process (or another Store in this process) holds the
	// file lock. The error returned by Open reads
	// "store <path> is locked by another bot process".
	ErrLocked = errors.New("store is locked by another bot process")
	// ErrSchemaTooNew: the file was written by a newer binary.
	ErrSchemaTooNew = errors.New("store schema is newer than this binary")
)

type lockedError struct{ path string }

func (e *lockedError) Error() string {
	return "store " + e.path + " is locked by another bot process"
}
func (e *lockedError) Unwrap() error { return ErrLocked }

// Defaults for Options.
const (
	DefaultLockTimeout   = time.Second
	DefaultMaxBatchDelay = 0 // a lone write commits at once; writes during a commit group
	DefaultMaxBatchSize  = 1000
)

// Options tunes Open. The zero value is valid.
type Options struct {
	// LockTimeout bounds the wait for the file lock (default 1s).
	LockTimeout time.Duration
	// MaxBatchDelay is how long a grouped write (Append, PutDelivery,
	// PutSessionInfo) waits for others to join its commit (default 0: none;
	// writes arriving during a commit join the next one anyway).
	MaxBatchDelay time.Duration
	// MaxBatchSize caps the appends committed together (default 1000).
	MaxBatchSize int

	// openFile replaces os.OpenFile for the store file (tests observe the
	// open with it).
	openFile func(string, int, os.FileMode) (*os.File, error)
}

// Store is one bbolt file holding every core store's buckets. It implements
// binding.Store, transcript.Store and delivery.Store and is safe for
// concurrent use.
type Store struct {
	db        *bbolt.DB
	path      string
	commit    *committer // group commit of the per-turn writes
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store at path and brings its schema up
// to date. The parent directory is created with mode 0700 and the file with
// mode 0600.
func Open(path string, opts Options) (*Store, error) {
	return open(path, opts, migrations)
}

func open(path string, opts Options, migs []migration) (*Store, error) {
	if path == "" {
		return nil, errors.New("bolt: empty store path")
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.MaxBatchDelay < 0 {
		opts.MaxBatchDelay = DefaultMaxBatchDelay
	}
	if opts.MaxBatchSize <= 0 {
		opts.MaxBatchSize = DefaultMaxBatchSize
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: create directory: %w", path, err)
	}
	db, err := openLocked(path, bbolt.Options{Timeout: opts.LockTimeout}, opts.openFile)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, &lockedError{path: path}
		}
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
		if err := os.Chmod(path, 0o600); err != nil {
			db.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	if err := migrate(db, path, migs); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, path: path, commit: &committer{db: db, delay: opts.MaxBatchDelay, max: opts.MaxBatchSize}}, nil
}

// Path is the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Close releases the file and its lock. Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}
