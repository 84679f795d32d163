//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// supervised: on Linux every command runs under a supervisor, a second
// copy of this binary (see supervise).
const supervised = true

// supervisorEnv marks the supervisor's environment; the command does not
// see it.
const supervisorEnv = "P2PC_EXEC_SUPERVISOR"

// newCmd returns the supervisor for c: this binary again, as the leader
// of a new process group, with status as its file descriptor 3. The
// kernel sends it SIGTERM when the thread that started it dies (see run),
// so when the plugin process dies, killed by the host or not.
func newCmd(c command, status *os.File) *exec.Cmd {
	return &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{"p2pc-exec-supervisor", c.path}, c.argv...),
		Dir:         c.dir,
		Env:         append(slices.Clip(c.env), supervisorEnv+"=1"),
		ExtraFiles:  []*os.File{status},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
}

// killGroup sends SIGKILL to the process group pgid. An empty group is
// not an error.
func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }

// isSupervisor says whether this process was started by newCmd.
func isSupervisor() bool { return os.Getenv(supervisorEnv) == "1" }

// supervise is the supervisor's main: it runs the command (os.Args[1] is
// its path, os.Args[2:] its argv) in its own process group and waits for
// it. A parent-death signal (SIGTERM) makes it SIGKILL the whole group,
// grandchildren included, which a parent-death signal on the command
// alone would not reach. It reports how the command ended on fd 3 ("exit
// N", "signal NAME" or "start MESSAGE") and exits.
func supervise() {
	status := os.NewFile(3, "status")
	syscall.CloseOnExec(3)
	report := func(format string, args ...any) {
		fmt.Fprintf(status, format+"\n", args...)
		status.Close()
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		syscall.Kill(0, syscall.SIGKILL)
	}()
	if len(os.Args) < 3 {
		report("start supervisor needs a path and an argv")
		os.Exit(127)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, supervisorEnv+"=") })
	cmd := &exec.Cmd{
		Path:        os.Args[1],
		Args:        os.Args[2:],
		Env:         env,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		report("start %v", err)
		os.Exit(127)
	}
	cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		report("signal %s", ws.Signal())
		os.Exit(128 + int(ws.Signal()))
	default:
		report("exit %d", cmd.ProcessState.ExitCode())
		os.Exit(cmd.ProcessState.ExitCode())
	}
}
