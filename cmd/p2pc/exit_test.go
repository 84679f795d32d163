package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

var phaseRe = regexp.MustCompile(`(?m)^phase\s+([0-9.]+) ms\s+\(\+\s*[0-9.]+ ms\)\s+(.*)$`)

// phasesOf reads the --trace-phases lines of a run: when each phase ended
// (ms from exec), in order.
func phasesOf(stderr string) (names []string, at map[string]float64) {
	at = map[string]float64{}
	for _, m := range phaseRe.FindAllStringSubmatch(stderr, -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		names = append(names, m[2])
		at[m[2]] = ms
	}
	return names, at
}

// TestRunExitsPromptly (issue 16, the whole command counts): a swarm run
// writes its results and report before it leaves the membership, its
// leave does not keep it (a hang check, not a timing test: within 5 s of
// the report), and the peers see it leave, not fail.
func TestRunExitsPromptly(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{
		startPeer(t, dir, "x1", 2, "--log-level", "info"),
		startPeer(t, dir, "x2", 2, "--log-level", "info"),
	}
	spec := writeSpec(t, dir, "echo.yaml", `
name: exit
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: i, from: 0, to: 39}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2",
		"--join", addrs(peers), "--trace-phases", "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	if _, err := report.Read(out); err != nil {
		t.Fatalf("report.json: %v", err)
	}

	names, at := phasesOf(r.stderr)
	order := func(a, b string) {
		t.Helper()
		ia, ib := -1, -1
		for i, n := range names {
			if n == a {
				ia = i
			}
			if n == b {
				ib = i
			}
		}
		if ia < 0 || ib < 0 || ia > ib {
			t.Errorf("phase %q must end before %q: %q", a, b, names)
		}
	}
	order("report written", "submitter node stopped (left the membership)")
	order("submitter node stopped (left the membership)", "cgroups removed: exit")
	if d := at["cgroups removed: exit"] - at["report written"]; d > 5000 {
		t.Errorf("the run exited %.0f ms after its report: %q", d, names)
	}
	t.Logf("report -> exit: %.1f ms (leave %.1f ms)", at["cgroups removed: exit"]-at["report written"], at["submitter node stopped (left the membership)"]-at["job run returned"])

	// Each peer reports the submitter's leave, and no failure of it.
	left := regexp.MustCompile(`member left.* member=(\S+-run-\d+)`)
	for _, p := range peers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := p.proc.WaitStderr(ctx, left)
		cancel()
		if err != nil {
			t.Fatalf("%s: no leave of the submitter reported: %v", p.name, err)
		}
		if failed := "member failed"; strings.Contains(p.proc.Stderr(), failed) {
			t.Errorf("%s reports a failure, not (only) the leave of %s:\n%s", p.name, m[1], tail(p.proc.Stderr()))
		}
	}
}

func tail(s string) string {
	if lines := strings.Split(s, "\n"); len(lines) > 30 {
		return strings.Join(lines[len(lines)-30:], "\n")
	}
	return s
}

// TestRemembersPluginInfo (issue 16): a run with no local slots starts
// no plugin on the submitter once the same plugin executable described
// itself to an earlier run: the answer is remembered by its digest, and
// the report names the plugin as before.
func TestRemembersPluginInfo(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "m1", 2)}
	spec := writeSpec(t, dir, "echo.yaml", `
name: memo
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: i, from: 0, to: 9}
`)
	started := "plugin started"
	// A run with a local slot asks the plugin (its process takes tasks).
	r := p2pc(t, "--log-level", "debug", "run", spec, "--out", filepath.Join(dir, "local"), "--no-mdns", "--local-slots", "1", "--no-progress")
	if r.code != 0 || !strings.Contains(r.stderr, started) {
		t.Fatalf("local run: exit %d, or no plugin started on the submitter\n%s", r.code, tail(r.stderr))
	}
	out := filepath.Join(dir, "out")
	r = p2pc(t, "--log-level", "debug", "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "1",
		"--join", addrs(peers), "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, tail(r.stderr))
	}
	if strings.Contains(r.stderr, started) {
		t.Errorf("a run with no local slots started the plugin on the submitter to describe it again:\n%s", tail(r.stderr))
	}
	rep := readReport(t, out)
	if rep.Plugin.Name != "echo" || rep.Plugin.Version == "" || rep.Summary.Done != 10 {
		t.Fatalf("report: plugin %+v, %d of %d done", rep.Plugin, rep.Summary.Done, rep.Summary.Total)
	}
}
