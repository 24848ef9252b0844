//go:build !linux

package main

import "os"

// noEcho is a no-op here: the token is echoed as typed.
func noEcho(*os.File) (restore func()) { return func() {} }
