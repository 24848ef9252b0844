package acp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrOutsideWorkspace is a file request the workspace refuses: a path
// outside it, one with a ".." element, or one whose symlinks lead out.
var ErrOutsideWorkspace = errors.New("path is outside the session's workspace")

// Workspace is one session's directory: the only place the agent's
// fs/read_text_file and fs/write_text_file requests may touch.
type Workspace struct {
	root string // absolute, symlinks resolved
}

// NewWorkspace creates dir (0700) if needed and returns it as a workspace.
func NewWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Workspace{root: real}, nil
}

// Root is the workspace's absolute path (symlinks resolved).
func (w *Workspace) Root() string { return w.root }

// inside reports whether p (clean, absolute) is the root or below it.
func (w *Workspace) inside(p string) bool {
	rel, err := filepath.Rel(w.root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Resolve checks an agent-supplied path and returns it with its symlinks
// resolved. ACP paths are absolute; a relative one is taken relative to
// the root. A path that does not exist yet (a file to write) is checked
// through its deepest existing ancestor.
func (w *Workspace) Resolve(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%q: %w", p, ErrOutsideWorkspace)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return "", fmt.Errorf("%q has a \"..\" element: %w", p, ErrOutsideWorkspace)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(w.root, p)
	}
	p = filepath.Clean(p)
	if !w.inside(p) {
		return "", fmt.Errorf("%q: %w", p, ErrOutsideWorkspace)
	}
	// Resolve the deepest existing ancestor; the rest does not exist yet.
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%q: %w", p, err)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return "", fmt.Errorf("%q: %w", p, ErrOutsideWorkspace)
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("%q: %w", p, err)
	}
	full := filepath.Join(real, rest)
	if !w.inside(full) {
		return "", fmt.Errorf("%q leads out through a symlink: %w", p, ErrOutsideWorkspace)
	}
	return full, nil
}

// ReadText reads a text file inside the workspace; line (1-based) and
// limit select lines when set.
func (w *Workspace) ReadText(p string, line, limit *int) (string, error) {
	full, err := w.Resolve(p)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", w.rel(full), err)
	}
	text := string(b)
	if line == nil && limit == nil {
		return text, nil
	}
	lines := strings.SplitAfter(text, "\n")
	start := 0
	if line != nil && *line > 1 {
		start = min(*line-1, len(lines))
	}
	end := len(lines)
	if limit != nil && *limit >= 0 && start+*limit < end {
		end = start + *limit
	}
	return strings.Join(lines[start:end], ""), nil
}

// WriteText writes a text file inside the workspace (0600), creating its
// parent directories. A symlink as the last element is refused (Resolve
// followed it already; O_NOFOLLOW closes the race with a new one).
func (w *Workspace) WriteText(p, content string) error {
	full, err := w.Resolve(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", w.rel(full), err)
	}
	// The directories just made are inside; check again in case a
	// symlink appeared meanwhile.
	if again, err := w.Resolve(full); err != nil || again != full {
		return fmt.Errorf("write %s: %w", w.rel(full), ErrOutsideWorkspace)
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", w.rel(full), err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", w.rel(full), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", w.rel(full), err)
	}
	return nil
}

// rel names a path relative to the root (error texts do not show where
// the bot keeps its data).
func (w *Workspace) rel(full string) string {
	if r, err := filepath.Rel(w.root, full); err == nil {
		return r
	}
	return filepath.Base(full)
}
