package acp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrOutsideWorkspace is a file request the workspace refuses: a path
// outside it, one with a ".." element, or one whose symlinks lead out.
var ErrOutsideWorkspace = errors.New("path is outside the session's workspace")

// ErrTooLarge is a file the agent may not read whole: over MaxReadBytes.
var ErrTooLarge = errors.New("the file is larger than the read limit")

// MaxReadBytes caps one fs/read_text_file: the whole file is read (and
// held) to answer it, so a huge file would cost the bot its memory.
const MaxReadBytes = 10 << 20

// Workspace is one session's directory: the only place the agent's
// fs/read_text_file and fs/write_text_file requests may touch.
type Workspace struct {
	root    string // absolute, symlinks resolved
	maxRead int64
	// resolved, if set, runs between the path check and the open (tests:
	// a symlink swapped in there must not be followed).
	resolved func(full string)
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
	return &Workspace{root: real, maxRead: MaxReadBytes}, nil
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
// limit select lines when set. The file is opened by openBeneath (no
// symlink followed between the check and the open), must be a regular
// file, and at most MaxReadBytes long.
func (w *Workspace) ReadText(p string, line, limit *int) (string, error) {
	f, full, err := w.open(p, openRead, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", w.rel(full), err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("read %s: not a regular file", w.rel(full))
	}
	if st.Size() > w.maxRead {
		return "", fmt.Errorf("read %s: %d bytes, over the %d-byte limit: %w", w.rel(full), st.Size(), w.maxRead, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, w.maxRead+1)) // it may grow meanwhile
	if err != nil {
		return "", fmt.Errorf("read %s: %w", w.rel(full), err)
	}
	if int64(len(b)) > w.maxRead {
		return "", fmt.Errorf("read %s: over the %d-byte limit: %w", w.rel(full), w.maxRead, ErrTooLarge)
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
// parent directories (0700), through openBeneath like ReadText.
func (w *Workspace) WriteText(p, content string) error {
	f, full, err := w.open(p, openWrite, true)
	if err != nil {
		return err
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

// open checks p (Resolve: inside, symlinks that stay inside resolved) and
// opens what it resolved to without following any symlink: the check and
// the open name the same file.
func (w *Workspace) open(p string, flag int, mkdirs bool) (*os.File, string, error) {
	full, err := w.Resolve(p)
	if err != nil {
		return nil, "", err
	}
	if w.resolved != nil {
		w.resolved(full)
	}
	rel, err := filepath.Rel(w.root, full)
	if err != nil {
		return nil, "", fmt.Errorf("%q: %w", p, ErrOutsideWorkspace)
	}
	f, err := openBeneath(w.root, rel, flag, 0o600, mkdirs)
	if err != nil {
		return nil, full, fmt.Errorf("open %s: %w", w.rel(full), err)
	}
	return f, full, nil
}

// rel names a path relative to the root (error texts do not show where
// the bot keeps its data).
func (w *Workspace) rel(full string) string {
	if r, err := filepath.Rel(w.root, full); err == nil {
		return r
	}
	return filepath.Base(full)
}
