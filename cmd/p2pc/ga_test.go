package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

const gaSpec = `
name: ga-fault
plugin: {{repo}}/plugins/tspga
params:
  instance: random
  cities: 400
  city_seed: 3
  islands: 3
  population: 48
  generations: 5000
  migrate_every: 20
  migrants: 2
  topology: ring
  checkpoint_every: 0.5
  seed: 7
tasks:
  - range: {param: island, from: 0, to: 2}
reduce: true
timeout: 5m
`

type gaBest struct {
	Length int `json:"length"`
}

func bestLength(t *testing.T, out string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "best.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g gaBest
	if err := json.Unmarshal(b, &g); err != nil || g.Length <= 0 {
		t.Fatalf("best.json %s: %v", b, err)
	}
	return g.Length
}

// Kill -9 the peer running an island mid-run: the island resumes from its
// checkpoint on another peer, the job completes, its answer is about as
// good as an undisturbed run's, and the report shows the move.
func TestGAIslandSurvivesKill(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; a resume after SIGKILL is covered in -short by TestCheckpointResumeAfterKill")
	}
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "ga1", 1), startPeer(t, dir, "ga2", 1), startPeer(t, dir, "ga3", 1), startPeer(t, dir, "ga4", 1)}
	spec := writeSpec(t, dir, "ga.yaml", gaSpec)

	calm := filepath.Join(dir, "calm")
	if r := p2pc(t, "run", spec, "--out", calm, "--no-mdns", "--local-slots", "0", "--min-peers", "4", "--join", addrs(peers)); r.code != 0 {
		t.Fatalf("undisturbed run: exit %d\n%s", r.code, r.stderr)
	}
	calmBest := bestLength(t, calm)

	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "4", "--join", addrs(peers)}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	victim := runningPeer(t, run, out, peers, 2)
	victim.proc.Kill()
	code, err := run.Wait(3 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.Stderr())
	}
	rep := readReport(t, out)
	island := rep.Tasks[0]
	last := island.Attempts[len(island.Attempts)-1]
	if island.State != report.TaskDone || !last.Resumed || last.Peer == victim.name {
		t.Fatalf("island 0 did not resume elsewhere: %+v", island.Attempts)
	}
	best := bestLength(t, out)
	// The GA's normal spread between seeds is a few percent at this size.
	if float64(best) > 1.05*float64(calmBest) {
		t.Fatalf("best tour %d after the kill, %d undisturbed: more than 5%% worse", best, calmBest)
	}
	t.Logf("killed %s; island 0 resumed on %s; best %d (undisturbed %d)", victim.name, last.Peer, best, calmBest)
}
