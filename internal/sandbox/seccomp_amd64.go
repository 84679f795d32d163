//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32ABI    = true // amd64 kernels may also take x32 system calls
)

// deniedArch are the system calls refused on amd64 only.
var deniedArch = []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB, unix.SYS_CREATE_MODULE}
