package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/harness"
)

// TestJoinDefaultPort: `p2pc join` without --listen listens on the
// documented port 7070, a second one on the same machine is refused with
// a hint, and `p2pc run --join HOST` (no port) finds it there. It binds a
// fixed port, so it runs only in the tests' private network namespace.
func TestJoinDefaultPort(t *testing.T) {
	harness.RequirePrivateNetns(t)
	if discovery.DefaultPort != 7070 {
		t.Fatalf("discovery.DefaultPort = %d, but join's --listen default and the README say 7070", discovery.DefaultPort)
	}
	dir := t.TempDir()
	p, err := harness.Start(p2pcBin, []string{"--data", filepath.Join(dir, "a"), "join", "--no-mdns", "--name", "a", "--slots", "2"}, harness.Options{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if err := p.CheckLogs(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.WaitOutput(ctx, listenRe)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(m[1], ":7070") {
		t.Fatalf("join without --listen listens at %s, want port 7070", m[1])
	}

	r := p2pc(t, "join", "--no-mdns", "--name", "b")
	if r.code != 2 || !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "--listen HOST:PORT") {
		t.Fatalf("second join on the default port: exit %d, want 2 with a hint\n%s", r.code, r.stderr)
	}

	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 3))
	out := filepath.Join(dir, "out")
	r = p2pc(t, "run", spec, "--out", out, "--no-progress", "--no-mdns", "--local-slots", "0", "--join", "127.0.0.1")
	if r.code != 0 {
		t.Fatalf("run --join 127.0.0.1: exit %d\n%s", r.code, r.stderr)
	}
	for _, task := range readReport(t, out).Tasks {
		if task.State != "done" || task.Peer != "a" {
			t.Fatalf("task %s: %s on %q, want done on peer a at the default port", task.ID, task.State, task.Peer)
		}
	}
}

// TestReleaseCrossBuild runs the script behind `just release` for a
// target other than this machine's: p2pc must build for Windows (no
// Linux-only file may be needed by a package the binary imports).
func TestReleaseCrossBuild(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("-short: cross-compiling the standard library takes a while on a cold cache")
	}
	dist := t.TempDir()
	// On a cold build cache this compiles the standard library and every
	// dependency for Windows: minutes on two busy cores.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, ".ci", "release"), "windows/amd64")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "DIST="+dist, "VERSION=test")
	// A timeout kills the script's whole process group, go build with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf(".ci/release windows/amd64: %v\n%s", err, out)
	}
	exe := filepath.Join(dist, "p2pc-test-windows-amd64.exe")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("MZ")) {
		t.Fatalf("%s is not a Windows executable", exe)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^[0-9a-f]{64}  p2pc-test-windows-amd64\.exe$`).Match(sums) {
		t.Fatalf("SHA256SUMS does not name the binary:\n%s", sums)
	}
}

// TestSystemdUnit: the command line of docs/p2pc-join.service is one the
// binary accepts (kong parses every flag before --help prints).
func TestSystemdUnit(t *testing.T) {
	parallel(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "p2pc-join.service"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/p2pc (.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/p2pc-join.service has no ExecStart=/usr/local/bin/p2pc line")
	}
	for _, want := range []string{"Restart=on-failure", "--swarm-file /etc/p2pc/swarm", " join"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("docs/p2pc-join.service lacks %q", want)
		}
	}
	args := append(strings.Fields(string(m[1])), "--help")
	r := p2pcEnv(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "--listen") {
		t.Fatalf("p2pc %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
}
