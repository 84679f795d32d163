package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// TestOwnerReplacesDeadHolders: both holders of a detached job die while
// its owner lives; the owner gives the bundle to the member left, which
// becomes its holder (so the journal has somewhere to go and the owner
// leases again), and the job completes with a clean run's outputs.
func TestOwnerReplacesDeadHolders(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 30 s): two members die")
	}
	dir := t.TempDir()
	const tasks = 1024
	peers, id, owner, spec := takeoverSwarm(t, dir, 4, 2, tasks, 50)
	j := waitDone(t, owner, id, tasks/4, 120*time.Second)
	if len(j.Holders) != 2 {
		t.Fatalf("job held by %v, want two holders", j.Holders)
	}
	var spare *peer
	for _, p := range peers {
		if p != owner && !slices.Contains(j.Holders, p.name) {
			spare = p
		}
	}
	for _, h := range j.Holders {
		peerNamed(peers, h).proc.Kill()
	}
	t.Logf("holders %v SIGKILLed; owner %s, spare %s", j.Holders, owner.name, spare.name)
	j = waitJobState(t, spare, id, "complete", 180*time.Second)
	if j.Owner != owner.name || j.Epoch != 1 || j.Done != tasks {
		t.Errorf("after the holders died: %+v, want still owned by %s at epoch 1, complete", j, owner.name)
	}
	if !slices.Contains(j.Holders, spare.name) {
		t.Errorf("holders %v after both died, want %s among them", j.Holders, spare.name)
	}
	if !strings.Contains(owner.proc.Stderr(), "the job has new holders") {
		t.Errorf("the owner did not log its new holders")
	}
	out := filepath.Join(dir, "fetched")
	if r := p2pc(t, "fetch", id[:12], "--out", out, "--no-mdns", "--join", spare.addr); r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	sameAsCleanRun(t, dir, spec, rep)
}

// sameAsCleanRun fails unless rep's outputs are those of a clean run of
// spec on this machine alone (into dir/clean).
func sameAsCleanRun(t *testing.T, dir, spec string, rep *report.Report) {
	t.Helper()
	clean := filepath.Join(dir, "clean")
	if r := p2pc(t, "run", spec, "--out", clean, "--no-mdns", "--local-slots", "16"); r.code != 0 {
		t.Fatalf("clean run: exit %d\n%s", r.code, r.stderr)
	}
	sameOutputs(t, rep, readReport(t, clean))
}
