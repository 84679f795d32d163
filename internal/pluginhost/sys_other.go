//go:build !linux

package pluginhost

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// Outside Linux there is no parent-death signal and no portable
// wait-without-reaping: the plugin is killed alone (not its process
// group) and its exit is seen when it is reaped.
const haveExitWatch = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killTree(_ int, p *os.Process) {
	if p != nil {
		_ = p.Kill()
	}
}

func waitExit(int) error { return nil }

func spawn(cmd *exec.Cmd, conf *sandbox.Confinement, cg *sandbox.Cgroup, lim sandbox.Limits, after func()) (sandbox.Status, error) {
	st, err := sandbox.StartConfined(cmd, conf, cg, lim)
	if err == nil {
		go after()
	}
	return st, err
}

// fileIdentity is unknown here: the executable is hashed before every start.
func fileIdentity(os.FileInfo) string { return "" }
