//go:build linux

package pluginhost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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

// Pdeathsig fires when the *thread* that forked the child exits, not the
// process (golang/go#27505). The Go runtime ends a thread when a goroutine
// that locked it exits without unlocking — any library may do that on any
// thread that once ran cmd.Start. So every plugin is forked from one
// goroutine locked to its thread for good: that thread lives as long as
// the host process, and Pdeathsig means "when the host dies".
var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread must not exit
			for r := range spawnCh {
				r.done <- r.cmd.Start()
			}
		}()
	})
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	spawnCh <- r
	return <-r.done
}

// fileIdentity names a file's content as the kernel sees it: device,
// inode, size, mtime and ctime ("" if unknown).
func fileIdentity(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}
