//go:build unix && !linux

package harness

import "syscall"

// sysProcAttr starts a child in a process group of its own when group is
// set (so Kill reaches its children). There is no parent-death signal
// outside Linux.
func sysProcAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group}
}

// killPID sends SIGKILL to one process.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
