//go:build unix

package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel (a path relative to root, as Resolve returns it
// with its symlinks already resolved) one component at a time from a
// descriptor of root, every component with O_NOFOLLOW: whatever the path
// checks saw, the file opened is the one reached without a symlink, so a
// symlink swapped in after the check is refused (ELOOP), not followed.
// With mkdirs, missing directories are made (0700) on the way. The one
// mechanism for the agent's reads and writes.
func openBeneath(root, rel string, flag int, perm os.FileMode, mkdirs bool) (*os.File, error) {
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace)
	}
	dfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: ".", Err: err}
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if rel == "." {
		parts = []string{"."}
	}
	for i, name := range parts {
		last := i == len(parts)-1
		if last {
			fd, err := unix.Openat(dfd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
			unix.Close(dfd)
			if err != nil {
				return nil, walkErr(rel, err)
			}
			return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(dfd, name, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				// O_DIRECTORY|O_NOFOLLOW on a symlink: ENOTDIR on some systems.
				var st unix.Stat_t
				if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			unix.Close(dfd)
			return nil, walkErr(rel, err)
		}
		unix.Close(dfd)
		dfd = fd
	}
	unix.Close(dfd)
	return nil, fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace) // not reached
}

// walkErr: a symlink met on the way is a refused path; anything else
// (ENOENT included, so fs.ErrNotExist matches) is the open's error.
func walkErr(rel string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%q: a symlink appeared in the path: %w", rel, ErrOutsideWorkspace)
	}
	return &os.PathError{Op: "open", Path: rel, Err: err}
}

const (
	openRead  = unix.O_RDONLY | unix.O_NONBLOCK // a FIFO does not block the open
	openWrite = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC
)
