//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// supervised: no supervisor here (no parent-death signal, no process
// groups): a command outlives a plugin that is killed.
const supervised = false

// newCmd returns c as is.
func newCmd(c command, _ *os.File) *exec.Cmd {
	return &exec.Cmd{Path: c.path, Args: c.argv, Dir: c.dir, Env: c.env}
}

// killGroup kills the process pid only.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func isSupervisor() bool { return false }

func supervise() {}
