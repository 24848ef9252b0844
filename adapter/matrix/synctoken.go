package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// TokenStore keeps the /sync position (next_batch) across restarts, so catch-up after downtime resumes from it.
// Load returns "" when nothing was saved yet.
type TokenStore interface {
	LoadSyncToken(ctx context.Context) (string, error)
	SaveSyncToken(ctx context.Context, token string) error
}

// MemoryTokenStore is a TokenStore in memory (tests; a process that may replay nothing after a restart).
type MemoryTokenStore struct {
	mu    sync.Mutex
	token string
}

// LoadSyncToken returns the saved token.
func (m *MemoryTokenStore) LoadSyncToken(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token, nil
}

// SaveSyncToken replaces the saved token.
func (m *MemoryTokenStore) SaveSyncToken(_ context.Context, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.token = token
	return nil
}

// FileTokenStore keeps the token in one file, replaced atomically (written to a temporary file in the same
// directory, synced, renamed over it, directory synced): a crash leaves the old or the new token, never a torn one.
type FileTokenStore struct {
	Path string
}

// NewFileTokenStore returns a store at path (its directory must exist).
func NewFileTokenStore(path string) *FileTokenStore { return &FileTokenStore{Path: path} }

// LoadSyncToken reads the token; a missing file is "" (first start).
func (f *FileTokenStore) LoadSyncToken(context.Context) (string, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load sync token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SaveSyncToken writes the token atomically.
func (f *FileTokenStore) SaveSyncToken(_ context.Context, token string) (err error) {
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save sync token: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.WriteString(token + "\n"); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		return fmt.Errorf("save sync token: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
