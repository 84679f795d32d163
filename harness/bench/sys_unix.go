//go:build unix

package bench

import "syscall"

// procGroup puts a command in a process group of its own.
func procGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup asks a process group to stop (SIGTERM: scripts clean up on it).
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGTERM) }

// killGroupNow kills a process group (SIGKILL).
func killGroupNow(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
