//go:build unix

package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// reexecWithout replaces this process (same PID) with p2pc run on args
// (which hold no token), handing token over on an inherited pipe named
// by swarmHandoffEnv. It returns only on failure.
func reexecWithout(args []string, token string) error {
	exe := "/proc/self/exe" // the running binary, even if it was replaced on disk
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("re-execute p2pc: %w", err)
		}
	}
	var p [2]int
	// Both ends are inherited over exec (no close-on-exec); nothing else
	// runs yet that could fork and inherit them too.
	if err := syscall.Pipe(p[:]); err != nil {
		return fmt.Errorf("re-execute p2pc: pipe: %w", err)
	}
	w := os.NewFile(uintptr(p[1]), "swarm token")
	_, err := w.WriteString(token + "\n") // far below a pipe's buffer
	w.Close()
	if err != nil {
		syscall.Close(p[0])
		return fmt.Errorf("re-execute p2pc: hand the token over: %w", err)
	}
	env := append(envWithout(os.Environ(), "P2PC_SWARM", swarmHandoffEnv), swarmHandoffEnv+"="+strconv.Itoa(p[0]))
	err = syscall.Exec(exe, append([]string{os.Args[0]}, args...), env)
	syscall.Close(p[0])
	return fmt.Errorf("re-execute p2pc: %w", err)
}
