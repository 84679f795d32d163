//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

// TestParentDeathKillsCommand runs a command from a child test process,
// kills that process with SIGKILL (as the host kills an overrunning
// plugin) and expects the command and its own children to die with it.
func TestParentDeathKillsCommand(t *testing.T) {
	if pidFile := os.Getenv("EXEC_TEST_PIDFILE"); pidFile != "" {
		sdktest.Run(context.Background(), &execTask{}, map[string]any{
			"command": []string{"sh", "-c", "sleep 60 & echo $$ $! > " + pidFile + "; wait"},
		})
		t.Fatal("the command was not supposed to end")
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	child := exec.Command(os.Args[0], "-test.run=^TestParentDeathKillsCommand$")
	// The child is killed mid-task: its temporary dirs go in ours.
	child.Env = append(os.Environ(), "EXEC_TEST_PIDFILE="+pidFile, "TMPDIR="+t.TempDir())
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pids := waitPIDs(t, pidFile, 2)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d not running", pid)
		}
	}
	child.Process.Kill()
	child.Wait()
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// alive says whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after "(comm)".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitPIDs reads the n pids a command wrote to file, on one line.
func waitPIDs(t *testing.T, file string, n int) []int {
	t.Helper()
	for range 500 {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			if len(pids) != n {
				t.Fatalf("%s holds %d pids, want %d", file, len(pids), n)
			}
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", file)
	return nil
}

func waitPID(t *testing.T, file string) int { return waitPIDs(t, file, 1)[0] }

// waitGone fails unless pid is gone (or a zombie) within 3 seconds.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 300 {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d still alive", pid)
}

func TestCancelKillsGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		// A background grandchild that ignores SIGTERM and holds stdout.
		_, err := sdktest.Run(ctx, &execTask{}, map[string]any{
			"command": []string{"trap '' TERM; sleep 60 & echo $! > " + pidFile + "; wait"},
			"shell":   true,
		})
		done <- err
	}()
	pid := waitPID(t, pidFile)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "sh stopped") {
			t.Errorf("err = %v, want a cancellation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	waitGone(t, pid)
	t.Logf("returned %v after start", time.Since(start))
}

func TestBackgroundProcessDoesNotHoldTask(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, err := sdktest.Run(context.Background(), &execTask{}, map[string]any{
		"command": []string{"sleep 60 & echo $! > " + pidFile + "; echo done"},
		"shell":   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	if d := time.Since(start); d > pipeGrace {
		t.Errorf("took %v: waited for the background process", d)
	}
	if got := string(out.Files[sdk.DataFile]); got != "done\n" {
		t.Errorf("data = %q", got)
	}
	waitGone(t, waitPID(t, pidFile))
}

func TestEscapedProcessDoesNotHoldTask(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("needs setsid")
	}
	pipeGrace = 200 * time.Millisecond
	t.Cleanup(func() { pipeGrace = 2 * time.Second })
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, err := sdktest.Run(context.Background(), &execTask{}, map[string]any{
		"command": []string{"setsid sh -c 'echo $$ > " + pidFile + "; exec sleep 60' & sleep 0.2; echo done"},
		"shell":   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if got := string(out.Files[sdk.DataFile]); got != "done\n" {
		t.Errorf("data = %q", got)
	}
	syscall.Kill(waitPID(t, pidFile), syscall.SIGKILL)
}
