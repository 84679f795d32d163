package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docBlock returns the first fenced block of language lang after the
// heading of docs/plugin-sdk.md.
func docBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "plugin-sdk.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/plugin-sdk.md has no heading %q", heading)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("docs/plugin-sdk.md: no ```%s block after %q", lang, heading)
	}
	return m[1]
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
	dir := t.TempDir()
	src := filepath.Join(dir, "primes")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(docBlock(t, "## A complete plugin", "go")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := docBlock(t, "## Plugins in their own repository", "sh")
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = src
	// The module cache and proxy of the machine; -mod=mod as a plugin
	// author's shell has it by default.
	cmd.Env = append(os.Environ(), "P2PC="+repoRoot, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the guide's commands failed: %v\n%s\n%s", err, script, out)
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
