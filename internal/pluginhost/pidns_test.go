//go:build linux

package pluginhost

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nsHost is a host process of this test binary, started with mode.
type nsHost struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startHost starts the test binary as a host (P2PC_TEST_HOST=mode) with
// TMPDIR=tmp. With pidns > 0 it runs in a PID namespace of its own, after
// pidns other processes there: so hosts in two namespaces get different
// pids, each missing from the other's namespace.
func startHost(t *testing.T, mode, tmp string, pidns int) *nsHost {
	t.Helper()
	path, _ := selfPlugin(t)
	var cmd *exec.Cmd
	if pidns > 0 {
		cmd = exec.Command("unshare", "--pid", "--fork", "--kill-child", "sh", "-c",
			`i=0; while [ $i -lt $1 ]; do /bin/true; i=$((i+1)); done; "$0"`, path, strconv.Itoa(pidns))
	} else {
		cmd = exec.Command(path)
	}
	cmd.Env = append(os.Environ(), envHost+"="+mode, "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &nsHost{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return h
}

// line waits for the host's next output line starting with prefix.
func (h *nsHost) line(t *testing.T, prefix string, d time.Duration) []string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("host %d ended without printing %q", h.cmd.Process.Pid, prefix)
			}
			if rest, ok := strings.CutPrefix(l, prefix+" "); ok {
				return strings.Fields(rest)
			}
		case <-timeout:
			t.Fatalf("host %d printed no %q line within %s", h.cmd.Process.Pid, prefix, d)
		}
	}
}

func needPIDNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare --pid")
	}
	if err := exec.Command("unshare", "--pid", "--fork", "true").Run(); err != nil {
		t.Skipf("cannot make a PID namespace: %v", err)
	}
}

// TestSweepAcrossPIDNamespaces: hosts in different PID namespaces share
// one TMPDIR. A host running tasks keeps its folders and its tasks succeed
// while another host's pools sweep; the folders of a SIGKILLed host go.
// (kill(pid, 0) from the sweeper's namespace called the busy host dead.)
func TestSweepAcrossPIDNamespaces(t *testing.T) {
	needPIDNamespaces(t)
	tmp, err := os.MkdirTemp("", "ns")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	busy := startHost(t, "busy", tmp, 20) // pid 22: absent from the sweeper's namespace
	busyDirs := busy.line(t, "dir", 30*time.Second)
	dead := startHost(t, "busy", tmp, 0)
	deadDirs := dead.line(t, "dir", 30*time.Second)
	dead.cmd.Process.Kill()
	dead.cmd.Wait()

	sweeper := startHost(t, "sweep", tmp, 2)
	if err := sweeper.cmd.Wait(); err != nil {
		t.Fatalf("sweeping host: %v", err)
	}
	for _, d := range busyDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the busy host's folder %s did not survive the sweep: %v", d, err)
		}
	}
	for _, d := range deadDirs {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the SIGKILLed host's folder %s was not swept: %v", d, err)
		}
	}
	busy.stdin.Close()
	got := busy.line(t, "done", 30*time.Second)
	if err := busy.cmd.Wait(); err != nil || len(got) != 2 || got[1] != "0" {
		t.Fatalf("busy host: %v, done %v (tasks, failures)", err, got)
	}
	for _, d := range busyDirs {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the busy host's Close left %s: %v", d, err)
		}
	}
}
