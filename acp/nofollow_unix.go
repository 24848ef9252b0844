//go:build unix

package acp

import "syscall"

const noFollow = syscall.O_NOFOLLOW
