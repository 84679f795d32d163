package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/jobdb"
)

// TestReportFromDatabase: `p2pc report OUT` writes the same report.json
// as the run wrote when it ended, from the job database alone.
func TestReportFromDatabase(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "r.yaml", `
plugin: {{repo}}/plugins/echo
retries: 1
tasks:
  - {id: ok, params: {v: 1}}
  - {id: flaky, params: {crash_attempts: 1}}
  - {id: fail, params: {fail: true}}
  - grid: {x: [1, 2], y: [a, b]}
`)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out); r.code != exitTaskFailed {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	want, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, "report.json")); err != nil {
		t.Fatal(err)
	}
	if r := p2pc(t, "report", out); r.code != 0 {
		t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
	}
	got, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("p2pc report differs from the run's report.json:\n%s\nwant\n%s", got, want)
	}
	if r := p2pc(t, "report", out, "--stdout"); r.code != 0 || r.stdout != string(want) {
		t.Fatalf("report --stdout: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDamagedDatabase: a run refuses an output folder whose job database
// is damaged and leaves it as it was; `p2pc report --salvage` prints what
// is readable; --force sets the database aside and starts afresh.
func TestDamagedDatabase(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "d.yaml", `
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: n, from: 1, to: 300}
`)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	path := filepath.Join(out, jobdb.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 2; i < len(data)/2+16384 && i < len(data); i++ {
		data[i] = byte(i * 13)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p2pc(t, "run", spec, "--out", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "corrupted") || !strings.Contains(r.stderr, "p2pc report") {
		t.Fatalf("run on a damaged database: exit %d\n%s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
		t.Fatal("the damaged database was changed")
	}
	if r := p2pc(t, "report", out); r.code != exitBadInput || !strings.Contains(r.stderr, "--salvage") {
		t.Fatalf("report of a damaged database: exit %d\n%s", r.code, r.stderr)
	}
	r = p2pc(t, "run", spec, "--out", out, "--force")
	if r.code != 0 {
		t.Fatalf("--force: exit %d\n%s", r.code, r.stderr)
	}
	aside, _ := filepath.Glob(path + ".broken-*")
	if len(aside) == 0 {
		t.Fatal("--force did not keep the damaged database aside")
	}
}
