//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	x32ABI    = false
)

// deniedArch are the system calls refused on arm64 only (none: it has
// no I/O port calls).
var deniedArch []uintptr
