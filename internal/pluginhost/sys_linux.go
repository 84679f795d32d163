//go:build linux

package pluginhost

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/digest"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// haveExitWatch: waitExit can wait for the plugin's exit without reaping
// it, so the process group is swept while its ID cannot be reused.
const haveExitWatch = true

// sysProcAttr puts the plugin in its own process group (so one signal
// reaches everything it started) and asks the kernel to SIGKILL it when
// the thread that started it dies (spawn keeps that thread alive for the
// life of the host process).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killTree SIGKILLs the process group led by pid. The caller guarantees
// the leader is not yet reaped, so the group ID is still ours.
func killTree(pid int, _ *os.Process) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// waitExit blocks until process pid has exited, leaving it unreaped (a
// zombie keeps its PID and process-group ID reserved).
func waitExit(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// spawn starts cmd from a fresh OS thread confined to conf (package
// sandbox), in cgroup cg (nil for none) with limits lim (sandbox.StartConfined),
// then runs after on that same thread. The goroutine locks the
// thread and never unlocks it, so the thread ends when after returns.
//
// Pdeathsig fires when the *thread* that forked the child exits, not the
// process (golang/go#27505): the plugin's thread lives until the plugin
// has exited (after waits for that), so Pdeathsig means "when the host
// dies".
func spawn(cmd *exec.Cmd, conf *sandbox.Confinement, cg *sandbox.Cgroup, lim sandbox.Limits, after func()) (sandbox.Status, error) {
	type started struct {
		st  sandbox.Status
		err error
	}
	done := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is confined
		st, err := sandbox.StartConfined(cmd, conf, cg, lim)
		done <- started{st, err}
		if err == nil {
			after()
		}
	}()
	s := <-done
	return s.st, s.err
}

// fileIdentity names a file's content as the kernel sees it: device,
// inode, size, mtime and ctime ("" if unknown).
func fileIdentity(fi os.FileInfo) string {
	id, _ := digest.Identity(fi)
	return id
}
