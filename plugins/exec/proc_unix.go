//go:build unix && !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// supervised: only Linux has a parent-death signal to trigger a
// supervisor, so elsewhere commands run directly, and outlive a plugin
// that is killed.
const supervised = false

// newCmd returns c as the leader of a new process group.
func newCmd(c command, _ *os.File) *exec.Cmd {
	return &exec.Cmd{
		Path:        c.path,
		Args:        c.argv,
		Dir:         c.dir,
		Env:         c.env,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }

func isSupervisor() bool { return false }

func supervise() {}
