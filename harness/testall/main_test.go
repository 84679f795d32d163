package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTree writes files (path -> body) under a new folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// buildTestall skips the test in -short mode, else builds this command
// into a temporary folder.
func buildTestall(t *testing.T, ctx context.Context) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs go test on two small modules")
	}
	bin := filepath.Join(t.TempDir(), "testall")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runTestall runs the built command in dir and returns its stdout and
// exit status.
func runTestall(t *testing.T, ctx context.Context, bin, dir string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "-count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("testall: %v\n%s%s", err, out, stderr.String())
	return "", 0
}

// lastLine is the last line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestCounts runs the real command on a repository of two modules whose
// first has passing, skipped and failing tests, a package that does not
// build, one whose TestMain panics and one whose test exits the binary:
// the second module still runs, each of those counts as failed, only the
// failing test's log is printed, and the status is 1.
func TestCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildTestall(t, ctx)
	root := writeTree(t, map[string]string{
		"go.mod": "module example.com/r\n\ngo 1.22\n",
		"ok/ok_test.go": `package ok
import "testing"
func TestPass(t *testing.T) { t.Log("quiet-pass-log") }
func TestSkip(t *testing.T) { t.Skip("skipped-here") }
func TestSub(t *testing.T) { t.Run("a", func(t *testing.T) {}); t.Run("b", func(t *testing.T) {}) }
`,
		"bad/bad_test.go": `package bad
import "testing"
func TestFail(t *testing.T) { t.Log("loud-fail-log"); t.Run("inner", func(t *testing.T) { t.Fatal("boom-fail") }) }
`,
		"broken/broken_test.go": `package broken
import "testing"
func TestX(t *testing.T) { undefinedName() }
`,
		"dies/dies_test.go": `package dies
import "testing"
func TestMain(m *testing.M) { panic("testmain-panic") }
func TestNever(t *testing.T) {}
`,
		"exits/exits_test.go": `package exits
import ("os"; "testing")
func TestExit(t *testing.T) { t.Log("about-to-exit"); os.Exit(1) }
`,
		"plugins/sdk/go.mod": "module example.com/sdk\n\ngo 1.22\n",
		"plugins/sdk/sdk_test.go": `package sdk
import "testing"
func TestSDK(t *testing.T) {}
`,
	})
	out, code := runTestall(t, ctx, bin, filepath.Join(root, "ok")) // found from a folder below the root
	t.Logf("testall printed:\n%s", out)
	if got, want := lastLine(out), "3 passed, 4 failed, 1 skipped"; got != want {
		t.Errorf("last line %q, want %q\n%s", got, want, out)
	}
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	for _, want := range []string{"loud-fail-log", "boom-fail", "about-to-exit", "testmain-panic", "undefinedName",
		"== go test ./... in plugins/sdk", "ok  \texample.com/sdk", "example.com/r/broken: build failed",
		"example.com/r/exits TestExit (did not end)", "example.com/r/dies: its test binary failed",
		"skipped:\n  example.com/r/ok TestSkip: ok_test.go:4: skipped-here\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
	// A skip's reason shows once, in the list of skipped tests above the
	// count, not among the test output.
	if n := strings.Count(out, "skipped-here"); n != 1 {
		t.Errorf("the skip's reason shows %d times, want once (in the list)\n%s", n, out)
	}
	for _, unwanted := range []string{"quiet-pass-log", "=== RUN"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("output has %q, which plain go test does not print\n%s", unwanted, out)
		}
	}
}

// TestAllPass: a repository whose tests pass ends with its count and
// status 0.
func TestAllPass(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildTestall(t, ctx)
	root := writeTree(t, map[string]string{
		"go.mod":                "module example.com/r\n\ngo 1.22\n",
		"a/a_test.go":           "package a\nimport \"testing\"\nfunc TestA(t *testing.T) {}\nfunc TestB(t *testing.T) {}\n",
		"plugins/sdk/go.mod":    "module example.com/sdk\n\ngo 1.22\n",
		"plugins/sdk/s_test.go": "package sdk\nimport \"testing\"\nfunc TestS(t *testing.T) {}\n",
	})
	out, code := runTestall(t, ctx, bin, root)
	if got, want := lastLine(out), "3 passed, 0 failed, 0 skipped"; got != want || code != 0 {
		t.Errorf("last line %q, status %d; want %q, 0\n%s", got, code, want, out)
	}
}

func TestHasTimeout(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  bool
	}{
		{nil, false},
		{[]string{"-race", "-count=1"}, false},
		{[]string{"-run", "timeout"}, false},
		{[]string{"-timeout", "5m"}, true},
		{[]string{"-timeout=5m"}, true},
		{[]string{"--test.timeout=1h"}, true},
	} {
		if got := hasTimeout(c.flags); got != c.want {
			t.Errorf("hasTimeout(%q) = %v, want %v", c.flags, got, c.want)
		}
	}
}
