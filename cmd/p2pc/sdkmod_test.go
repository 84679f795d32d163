package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// guideBlock returns the first fenced block of language lang after the
// heading of docs/plugin-sdk.md in the repository at root.
func guideBlock(root, heading, lang string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "plugin-sdk.md"))
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("docs/plugin-sdk.md has no heading %q", heading)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		return "", fmt.Errorf("docs/plugin-sdk.md: no ```%s block after %q", lang, heading)
	}
	return m[1], nil
}

// buildGuidePlugin writes the guide's primes plugin into the folder dir and
// runs there the commands of docs/plugin-sdk.md ("Plugins in their own
// repository"), against the SDK of the repository at root, with env added
// to the environment.
func buildGuidePlugin(ctx context.Context, root, dir string, env ...string) error {
	src, err := guideBlock(root, "## A complete plugin", "go")
	if err != nil {
		return err
	}
	script, err := guideBlock(root, "## Plugins in their own repository", "sh")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// The module cache and proxy of the machine; -mod=mod as a plugin
	// author's shell has it by default.
	cmd.Env = append(append(os.Environ(), "P2PC="+root, "GOFLAGS=-mod=mod", "GOWORK=off"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the guide's commands failed: %w\n%s\n%s", err, script, out)
	}
	return nil
}

// fetchModules fetches from the Go module proxy what the tests' go
// commands need: the root module's requirements (TestReleaseCrossBuild
// builds for Windows, whose packages need modules Linux's do not) and
// those of the guide's out-of-tree plugin (TestOutOfTreePlugin), by
// running the guide's commands once. TestMain calls it before the tests
// enter their private network namespace, which has no route to the proxy.
func fetchModules(ctx context.Context) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if err := harness.FetchModules(ctx, root); err != nil {
		return err
	}
	if !selected("TestOutOfTreePlugin") {
		return nil
	}
	dir, err := os.MkdirTemp("", "p2pc-guide-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := buildGuidePlugin(ctx, root, dir); err != nil {
		return fmt.Errorf("fetch the modules of docs/plugin-sdk.md's out-of-tree plugin: %w\n%s", err, harness.ProxyHint(ctx))
	}
	return nil
}

// selected reports whether -test.run may select the top-level test name
// (-test.skip is not consulted: a test it skips may be fetched for).
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	ok, err := regexp.MatchString(top, name)
	return ok || err != nil
}

const primesSpec = `
plugin: ./primes
params: {size: 1000%s}
tasks:
  - range: {param: from, from: 0, to: %d, step: 1000}
reduce: true
retries: 0
`

// TestOutOfTreePlugin builds the guide's primes plugin as a module of its
// own in a temporary folder, exactly with the commands of
// docs/plugin-sdk.md ("Plugins in their own repository"), and runs a job
// with it through the real binary: the reduce step reads each task's
// output with one call, and DecodeStrict turns a misspelt key into the
// task's error.
func TestOutOfTreePlugin(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "primes")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var env []string
	if harness.InPrivateNetns() {
		// fetchModules ran the same commands before the tests entered the
		// namespace: the modules are in the cache, verified against the
		// checksum database, which is out of reach from here (go mod tidy
		// would check its latest tree again for the new go.sum).
		env = append(env, "GOSUMDB=off")
	}
	if err := buildGuidePlugin(ctx, repoRoot, src, env...); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^\s*(require\s+)?github\.com/p2pc/p2pc\s`).Match(gomod) {
		t.Fatalf("the plugin's go.mod requires the p2pc module, not only the SDK:\n%s", gomod)
	}
	for _, heavy := range []string{"memberlist", "mdns", "kong", "yaml", "sqlite", "cheggaaa"} {
		if strings.Contains(string(gomod), heavy) {
			t.Errorf("the plugin's go.mod requires %s, a requirement of p2pc's, not of the SDK:\n%s", heavy, gomod)
		}
	}
	if n := strings.Count(string(gomod), "// indirect"); n > 16 {
		t.Errorf("the plugin's go.mod has %d indirect requirements, want only the SDK's:\n%s", n, gomod)
	}
	if fi, err := os.Stat(filepath.Join(src, "primes")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("go build made no executable primes: %v", err)
	}

	// p2pc builds the folder with its own go.mod and runs the job.
	spec := writeSpec(t, dir, "primes.yaml", fmt.Sprintf(primesSpec, "", 9000))
	out := filepath.Join(dir, "out")
	r := p2pcEnv(t, []string{"GOFLAGS=-mod=mod", "GOWORK=off"}, "--data", dataDir, "run", spec, "--out", out, "--no-progress", "--no-mdns")
	if r.code != 0 {
		t.Fatalf("p2pc run primes: exit %d\n%s", r.code, r.stderr)
	}
	total, err := os.ReadFile(filepath.Join(out, "total.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(total) != "1229\n" { // primes below 10000
		t.Fatalf("total.txt = %q, want the 1229 primes below 10000", total)
	}

	// A misspelt key fails the task, named by DecodeStrict.
	spec = writeSpec(t, dir, "typo.yaml", fmt.Sprintf(primesSpec, ", sise: 10", 0))
	out = filepath.Join(dir, "typo")
	r = p2pcEnv(t, []string{"GOFLAGS=-mod=mod", "GOWORK=off"}, "--data", dataDir, "run", spec, "--out", out, "--no-progress", "--no-mdns")
	if r.code == 0 {
		t.Fatalf("p2pc run with a misspelt key: exit 0\n%s", r.stderr)
	}
	rep := readReport(t, out)
	if len(rep.Tasks) != 1 || len(rep.Tasks[0].Attempts) == 0 || !strings.Contains(rep.Tasks[0].Attempts[0].Error, `unknown field "sise"`) {
		t.Fatalf("report does not carry DecodeStrict's error: %+v", rep.Tasks)
	}
}
