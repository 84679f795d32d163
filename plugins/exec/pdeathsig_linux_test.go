//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

// TestParentDeathKillsCommand runs a command from a child test process,
// kills that process with SIGKILL (as the host kills an overrunning
// plugin) and expects the command to die with it.
func TestParentDeathKillsCommand(t *testing.T) {
	if pidFile := os.Getenv("EXEC_TEST_PIDFILE"); pidFile != "" {
		sdktest.Run(context.Background(), &execTask{}, map[string]any{
			"command": []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 60"},
		})
		t.Fatal("the command was not supposed to end")
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	child := exec.Command(os.Args[0], "-test.run=^TestParentDeathKillsCommand$")
	child.Env = append(os.Environ(), "EXEC_TEST_PIDFILE="+pidFile)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, pidFile)
	if !alive(pid) {
		t.Fatalf("command %d not running", pid)
	}
	child.Process.Kill()
	child.Wait()
	waitGone(t, pid)
}
