// Command testall runs the tests of both Go modules of the repository, the
// root and the plugin SDK (plugins/sdk, a module of its own that the root's
// ./... does not include), the second whatever the first's result:
//
//	go run ./harness/testall [go test flags]
//
// It runs `go test -json [flags] ./...` in each module and prints what a
// plain `go test ./...` prints: a line per package, and the output of
// failing tests only (a test's log is held until it ends), then the
// skipped tests, each with the last line it logged (its reason). Its last
// line is the count of top-level tests over both modules, alone on its line:
//
//	N passed, N failed, N skipped
//
// A package that fails without a failing test (it does not build, its
// TestMain or an init panics, its binary times out or exits) counts as
// one failed test, and a test still running when its binary died counts
// as failed. The exit status is 1 if anything failed, 0 otherwise.
//
// Unless the flags set -timeout, each test binary gets 30 minutes instead
// of go test's 10: on an empty build cache the end-to-end tests build p2pc
// and plugins, for Windows too, before and while they run.
//
// It imports only the standard library, so that `go run` works from a
// fresh clone before any module is downloaded.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// modules are the repository's module folders, relative to its root.
var modules = []string{".", "plugins/sdk"}

func main() {
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testall:", err)
		os.Exit(2)
	}
	os.Exit(run(root, modules, os.Args[1:], os.Stdout, os.Stderr))
}

// repoRoot is the nearest folder at or above the working directory that
// holds go.mod and plugins/sdk/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, "plugins", "sdk", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository: no folder at or above the working directory holds go.mod and plugins/sdk/go.mod")
		}
		dir = parent
	}
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// run tests every module under root with `go test -json flags ./...`,
// printing to stdout (stderr gets the go command's own stderr), and
// returns the exit status.
func run(root string, mods, flags []string, stdout, stderr io.Writer) int {
	if !hasTimeout(flags) {
		flags = append([]string{"-timeout", defaultTimeout}, flags...)
	}
	t := newTally(stdout)
	for _, m := range mods {
		fmt.Fprintf(stdout, "== go test ./... in %s\n", m)
		args := append(append([]string{"test", "-json"}, flags...), "./...")
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, m)
		cmd.Stderr = stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.fail(m, fmt.Sprintf("go test: %v", err))
			continue
		}
		if err := cmd.Start(); err != nil {
			t.fail(m, fmt.Sprintf("go test: %v", err))
			continue
		}
		failedBefore := t.failed
		readErr := t.read(pipe)
		waitErr := cmd.Wait()
		if readErr != nil {
			t.fail(m, fmt.Sprintf("read go test's output: %v", readErr))
		}
		t.flush()
		if waitErr != nil && t.failed == failedBefore {
			// go test failed, but no test or package said so (a
			// pattern that matched nothing, a broken go.mod, ...).
			t.fail(m, fmt.Sprintf("go test ./... in %s: %v", m, waitErr))
		}
	}
	return t.summary()
}

// defaultTimeout is each test binary's -timeout unless the flags set one.
const defaultTimeout = "30m"

// hasTimeout reports whether the go test flags set -timeout.
func hasTimeout(flags []string) bool {
	for _, f := range flags {
		if !strings.HasPrefix(f, "-") {
			continue // a flag's value
		}
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if name == "timeout" || name == "test.timeout" {
			return true
		}
	}
	return false
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

// tally counts top-level tests and prints output as plain go test would.
type tally struct {
	w                       io.Writer
	passed, failed, skipped int
	failures                []string
	skips                   []string // "pkg Test: why", why its last output line
	pkgs                    map[string]*pkgState
}

// pkgState is what a package's events have said so far.
type pkgState struct {
	// running holds the output of each top-level test that has started
	// and not ended, printed only if it fails.
	running map[string][]string
	order   []string // running's keys in start order
	failed  int      // top-level tests that failed
}

func newTally(w io.Writer) *tally {
	return &tally{w: w, pkgs: map[string]*pkgState{}}
}

// read handles the events of one go test -json stream until it ends. A
// line that is not JSON is printed as it is.
func (t *tally) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if !bytes.HasPrefix(line, []byte("{")) || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(t.w, "%s\n", line)
			continue
		}
		t.handle(e)
	}
	return sc.Err()
}

// framing reports whether a test's output line only marks where the
// test runs (go test -json turns on -v, which prints them).
func framing(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (t *tally) pkg(name string) *pkgState {
	p := t.pkgs[name]
	if p == nil {
		p = &pkgState{running: map[string][]string{}}
		t.pkgs[name] = p
	}
	return p
}

func (t *tally) handle(e event) {
	switch {
	case e.Action == "build-output":
		io.WriteString(t.w, e.Output)
	case e.Test != "":
		t.handleTest(e)
	case e.Action == "output":
		if strings.HasPrefix(e.Output, "FAIL") {
			t.unended(e.Package) // their output before the package's FAIL line
		}
		if strings.TrimSpace(e.Output) != "PASS" { // plain go test prints no PASS line
			io.WriteString(t.w, e.Output)
		}
	case e.Action == "fail":
		t.packageFailed(e)
	case e.Action == "pass" || e.Action == "skip":
		delete(t.pkgs, e.Package)
	}
}

func (t *tally) handleTest(e event) {
	p := t.pkg(e.Package)
	top, _, sub := strings.Cut(e.Test, "/")
	switch e.Action {
	case "run":
		if _, ok := p.running[top]; !ok && !sub {
			p.running[top] = nil
			p.order = append(p.order, top)
		}
	case "output":
		if !framing(e.Output) {
			p.running[top] = append(p.running[top], e.Output)
		}
	case "pass", "skip", "fail":
		if sub {
			return // a subtest's result shows in its parent's
		}
		out := p.running[top]
		p.end(top)
		switch e.Action {
		case "pass":
			t.passed++
		case "skip":
			t.skipped++
			t.skips = append(t.skips, e.Package+" "+top+": "+skipWhy(out))
		case "fail":
			p.failed++
			t.failed++
			t.failures = append(t.failures, e.Package+" "+top)
			for _, l := range out {
				io.WriteString(t.w, l)
			}
		}
	}
}

// skipWhy is the reason a skipped test gave: its last output line that
// is not go test's own framing, trimmed ("" if none).
func skipWhy(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(out[i]); l != "" && !strings.HasPrefix(l, "--- SKIP") {
			return l
		}
	}
	return ""
}

// end forgets a test that has ended.
func (p *pkgState) end(test string) {
	delete(p.running, test)
	for i, n := range p.order {
		if n == test {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
}

// packageFailed: tests still running when the package failed died with
// its binary; a package that failed with no failing test counts as one.
func (t *tally) packageFailed(e event) {
	t.unended(e.Package)
	p := t.pkg(e.Package)
	if p.failed == 0 {
		why := "its test binary failed without a failing test"
		if e.FailedBuild != "" {
			why = "build failed"
		}
		t.fail(e.Package, why)
	}
	delete(t.pkgs, e.Package)
}

// unended prints and counts as failed the tests of pkg that are still
// running: its test binary has ended.
func (t *tally) unended(pkg string) {
	p := t.pkgs[pkg]
	if p == nil {
		return
	}
	for _, test := range p.order {
		for _, l := range p.running[test] {
			io.WriteString(t.w, l)
		}
		fmt.Fprintf(t.w, "--- FAIL: %s (did not end: its test binary died)\n", test)
		p.failed++
		t.failed++
		t.failures = append(t.failures, pkg+" "+test+" (did not end)")
	}
	p.running, p.order = map[string][]string{}, nil
}

// fail counts a failure that is no test's.
func (t *tally) fail(what, why string) {
	t.failed++
	t.failures = append(t.failures, what+": "+why)
}

// flush prints what is left of packages whose stream ended without a
// result (the go command died).
func (t *tally) flush() {
	names := make([]string, 0, len(t.pkgs))
	for n := range t.pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.packageFailed(event{Package: n})
	}
}

// summary prints the failures and the count line, and returns the exit
// status.
func (t *tally) summary() int {
	if len(t.skips) > 0 {
		fmt.Fprintln(t.w, "\nskipped:")
		for _, s := range t.skips {
			fmt.Fprintln(t.w, "  "+s)
		}
	}
	if len(t.failures) > 0 {
		fmt.Fprintln(t.w, "\nfailed:")
		for _, f := range t.failures {
			fmt.Fprintln(t.w, "  "+f)
		}
	}
	fmt.Fprintf(t.w, "%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped)
	if t.failed > 0 {
		return 1
	}
	return 0
}
