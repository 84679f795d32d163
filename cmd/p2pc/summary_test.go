package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryWarns: the summary a run prints at its end gives the
// report's warnings, here the verification it could not do alone.
func TestSummaryWarns(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "w.yaml", fmt.Sprintf(echoSpec, 3)+"verify: {replicas: 2}\n")
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1", "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	if len(rep.Warnings) == 0 {
		t.Fatalf("report.json has no warning for verify alone")
	}
	if want := "  warning: " + rep.Warnings[0] + "\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("the summary does not print the report's warning %q:\n%s", want, r.stderr)
	}
}
