package harness

import (
	"os"
	"syscall"
)

// The harness drives Linux labs (namespaces, cgroups); on Windows it only
// compiles, so that p2pc itself builds there, and starts and kills plain
// processes.

func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// killPID terminates one process.
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// killGroup terminates the process (Windows has no process groups here).
func killGroup(pid int) error { return killPID(pid) }
