package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// localDigests runs spec on this machine alone and returns each task's
// digest: the honest answers.
func localDigests(t *testing.T, spec, out string) map[string]string {
	t.Helper()
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	d := map[string]string{}
	for _, task := range readReport(t, out).Tasks {
		d[task.ID] = task.Digest
	}
	return d
}

const verifiedMandelbrot = `
name: verified
plugin: {{repo}}/plugins/mandelbrot
params: {width: 160, height: 120, max_iter: 100, bands: 24}
tasks:
  - range: {param: band, from: 0, to: 23}
reduce: true
verify: {%s}
`

func TestVerifyOneLiar(t *testing.T) {
	dir := t.TempDir()
	var peers []*peer
	for i := range 4 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("h%d", i), 1))
	}
	liar := startPeer(t, dir, "liar", 2, "--fault-lie-rate", "1")
	peers = append(peers, liar)
	// 48 tasks of some milliseconds each, so that the liar, whatever its
	// start under load, votes at least sched.ExcludeAfter times: with 24
	// sub-millisecond tasks it once voted only twice in CI before honest
	// peers had done the whole job.
	spec := writeSpec(t, dir, "v.yaml", strings.NewReplacer("bands: 24", "bands: 48", "to: 23", "to: 47", "max_iter: 100", "max_iter: 1500").Replace(fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2")))
	honest := localDigests(t, spec, filepath.Join(dir, "local"))

	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "5", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	liarVotes := 0
	for _, task := range rep.Tasks {
		if task.Digest != honest[task.ID] {
			t.Errorf("task %s: accepted a wrong result (%.12s, honest %.12s), votes %v", task.ID, task.Digest, honest[task.ID], task.Votes)
		}
		if task.Peer == "liar" {
			t.Errorf("task %s: the liar's output was accepted", task.ID)
		}
		for _, v := range task.Votes {
			if v.Peer == "liar" {
				liarVotes++
			}
		}
	}
	excluded := false
	for _, e := range rep.Excluded {
		excluded = excluded || e.Peer == "liar"
	}
	if !excluded {
		t.Errorf("the liar was not excluded; report: excluded %v, peers %v", rep.Excluded, rep.Peers)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(dir, "local", "mandelbrot.png"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("verified PNG differs from the local one")
	}
	t.Logf("liar voted %d times before exclusion; excluded: %+v; peers: %+v", liarVotes, rep.Excluded, rep.Peers)
}

func TestVerifyColludingLiars(t *testing.T) {
	if testing.Short() {
		t.Skip("slow; TestVerifyOneLiar covers voting in -short")
	}
	dir := t.TempDir()
	var peers []*peer
	for i := range 3 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("h%d", i), 1))
	}
	for i := range 2 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("liar%d", i), 1, "--fault-lie-rate", "1", "--fault-lie-collude"))
	}
	spec := writeSpec(t, dir, "v.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 2, quorum: 2, max_replicas: 5"))
	honest := localDigests(t, spec, filepath.Join(dir, "local"))

	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "5", "--join", addrs(peers))
	if r.code != 0 && r.code != exitTaskFailed {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	disputed, failed := 0, 0
	for _, task := range rep.Tasks {
		digests := map[string]bool{}
		for _, v := range task.Votes {
			digests[v.Digest] = true
		}
		if len(digests) > 1 {
			disputed++
		}
		switch task.State {
		case report.TaskDone:
			if task.Digest != honest[task.ID] {
				t.Errorf("task %s: silently accepted a wrong result; votes %v, verdict %q", task.ID, task.Votes, task.Verdict)
			}
		case report.TaskFailed:
			failed++
			if task.Verdict == "" {
				t.Errorf("task %s failed without a verdict", task.ID)
			}
		default:
			t.Errorf("task %s: state %s", task.ID, task.State)
		}
	}
	if disputed == 0 {
		t.Errorf("no disagreement was detected")
	}
	if r.code == exitTaskFailed && failed == 0 {
		t.Errorf("exit %d but no task failed", r.code)
	}
	t.Logf("exit %d; %d tasks disputed, %d failed loudly; excluded %+v; peers %+v", r.code, disputed, failed, rep.Excluded, rep.Peers)
}

// TestSpotCheckCatchesColludingMajority: two colluding liars of three peers
// win every vote (replicas 3, quorum 2); spot checks on the submitter's
// own slot catch them, and every output ends up right.
func TestSpotCheckCatchesColludingMajority(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "h0", 1)}
	for i := range 2 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("liar%d", i), 1, "--fault-lie-rate", "1", "--fault-lie-collude"))
	}
	plain := writeSpec(t, dir, "v.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2"))
	spot := writeSpec(t, dir, "s.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2, spot_check: 0.5"))
	honest := localDigests(t, plain, filepath.Join(dir, "local"))
	run := func(spec, out string) (result, *report.Report) {
		r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "3", "--wait-peers", "20s", "--join", addrs(peers))
		return r, readReport(t, out)
	}

	// Without spot checks the colluding majority wins.
	_, rep := run(plain, filepath.Join(dir, "plain"))
	wrong := 0
	for _, task := range rep.Tasks {
		if task.State == report.TaskDone && task.Digest != honest[task.ID] {
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatalf("without spot checks no wrong output was accepted: the test shows nothing (tasks %+v)", rep.Tasks)
	}
	t.Logf("without spot checks: %d of %d outputs accepted wrong", wrong, len(rep.Tasks))

	out := filepath.Join(dir, "spot")
	r, rep := run(spot, out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, task := range rep.Tasks {
		if task.State != report.TaskDone || task.Digest != honest[task.ID] {
			t.Errorf("task %s: %s with %.12s, honest %.12s; votes %v, verdict %q", task.ID, task.State, task.Digest, honest[task.ID], task.Votes, task.Verdict)
		}
	}
	if rep.SpotChecks == nil || len(rep.SpotChecks.Caught) == 0 {
		t.Fatalf("report.json names no caught spot check: %+v", rep.SpotChecks)
	}
	excluded := map[string]bool{}
	for _, e := range rep.Excluded {
		excluded[e.Peer] = true
	}
	if !excluded["liar0"] || !excluded["liar1"] || excluded["h0"] {
		t.Errorf("excluded %+v, want liar0 and liar1 only", rep.Excluded)
	}
	if !strings.Contains(r.stderr, "spot checks:") || !strings.Contains(r.stderr, "excluded as liars: liar") {
		t.Errorf("the summary does not report the spot checks:\n%s", r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(dir, "local", "mandelbrot.png"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("spot-checked PNG differs from the local one")
	}
	t.Logf("spot checks: %d re-run, %d caught; excluded %+v", rep.SpotChecks.Checked, len(rep.SpotChecks.Caught), rep.Excluded)
}
