//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group. Only Linux has a
// parent-death signal: elsewhere a command outlives a plugin that is
// killed.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }
