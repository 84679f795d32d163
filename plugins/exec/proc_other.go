//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// setProcAttr does nothing: no process groups here.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the process pid only.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
