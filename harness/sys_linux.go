package harness

import "syscall"

// sysProcAttr starts a child that dies with this process, in a process
// group of its own when group is set (so Kill reaches its children).
func sysProcAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
}

// killPID sends SIGKILL to one process.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
