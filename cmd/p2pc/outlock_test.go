package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/report"
)

// TestConcurrentRunsOneOutput: a second `p2pc run` on the output folder of
// a running one exits 2 at once, naming the first (pid, host, start), and
// the first completes correctly.
func TestConcurrentRunsOneOutput(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "slow.yaml", `
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 100}
tasks:
  - range: {param: n, from: 1, to: 20}
`)
	out := filepath.Join(dir, "out")
	first, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--slots", "2"}, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Kill()
	// Wait until the first run holds the folder and has done a task.
	deadline := time.Now().Add(60 * time.Second)
	for {
		lock, _ := os.ReadFile(filepath.Join(out, dirlock.FileName))
		if strings.Contains(string(lock), "pid "+strconv.Itoa(first.Pid())) && doneTasks(out) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run neither locked %s nor finished a task within 60s\n%s", out, first.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	r := p2pc(t, "run", spec, "--out", out, "--slots", "2")
	took := time.Since(start)
	host, _ := os.Hostname()
	if r.code != exitBadInput {
		t.Fatalf("second run: exit %d, want %d\n%s", r.code, exitBadInput, r.stderr)
	}
	for _, want := range []string{"in use by another p2pc run", "pid " + strconv.Itoa(first.Pid()), host, "started "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("second run's message lacks %q:\n%s", want, r.stderr)
		}
	}
	if took > 10*time.Second {
		t.Errorf("second run took %s to give up: it should stop at once", took)
	}
	t.Logf("second run, after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(r.stderr))

	code, err := first.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, first.Stderr())
	}
	if err := first.CheckLogs(); err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, out)
	if rep.State != report.StateComplete || rep.Summary.Done != 20 {
		t.Fatalf("first run: state %s, done %d of 20", rep.State, rep.Summary.Done)
	}
	if _, err := os.Stat(filepath.Join(out, dirlock.FileName)); !os.IsNotExist(err) {
		t.Errorf("the finished run left its lock file: %v", err)
	}
}

// TestLockedOutputUnchanged: a run refused because another process holds
// the output folder changes nothing in it.
func TestLockedOutputUnchanged(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "a.yaml", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a, params: {v: 1}}]\n")
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	// A report reader needs no lock, and a finished run leaves none.
	readReport(t, out)
	held, err := dirlock.Acquire(filepath.Join(out, dirlock.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	before := snapshot(t, out)
	for _, args := range [][]string{{"run", spec, "--out", out}, {"run", spec, "--out", out, "--force"}} {
		r := p2pc(t, args...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, "pid "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("%v into a locked folder: exit %d\n%s", args, r.code, r.stderr)
		}
		if after := snapshot(t, out); after != before {
			t.Fatalf("%v changed the locked folder:\nbefore %s\nafter  %s", args, before, after)
		}
	}
}

// snapshot describes every file under dir: name, mode, size, mtime, content digest.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b.WriteString(rel + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
