//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// noEcho turns the terminal's echo off (a pasted token stays off the
// screen) and returns what restores it.
func noEcho(f *os.File) (restore func()) {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	old := *t
	t.Lflag &^= unix.ECHO
	if unix.IoctlSetTermios(fd, unix.TCSETS, t) != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, &old) }
}
