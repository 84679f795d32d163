//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group and has the
// kernel SIGKILL it when the thread that started it (see run) dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to the process group pgid. An empty group is
// not an error.
func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }
