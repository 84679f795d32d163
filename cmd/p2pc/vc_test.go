package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

type probeOut struct {
	Increments []uint64 `json:"increments"`
	Received   string   `json:"received"`
	ResumedAt  int      `json:"resumed_at"`
	Steps      int      `json:"steps"`
}

func probeOutput(t *testing.T, out, id string) probeOut {
	t.Helper()
	b := taskData(t, out, id)
	var o probeOut
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("task %s output %s: %v", id, b, err)
	}
	return o
}

// Thousands of concurrent increments of one global from tasks on three
// peers: every value 1..N is produced exactly once (no lost update, none
// applied twice), whatever the interleaving.
func TestGlobalsLinearizable(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "g1", 2), startPeer(t, dir, "g2", 2), startPeer(t, dir, "g3", 2)}
	const tasks, each = 12, 250
	spec := writeSpec(t, dir, "g.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/vcprobe
params: {increments: %d}
tasks:
  - range: {param: index, from: 0, to: %d}
`, each, tasks-1))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	var all []uint64
	for _, task := range rep.Tasks {
		all = append(all, probeOutput(t, out, task.ID).Increments...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) != tasks*each {
		t.Fatalf("%d increments, want %d", len(all), tasks*each)
	}
	for i, v := range all {
		if v != uint64(i+1) {
			t.Fatalf("increment values are not exactly 1..%d: position %d holds %d", tasks*each, i, v)
		}
	}
	if len(sharesOf(rep)) < 3 {
		t.Errorf("tasks ran on %v, want all three peers", sharesOf(rep))
	}
	t.Logf("%d increments from %d tasks, shares %v", len(all), tasks, sharesOf(rep))
}

// A ring of tasks on several peers, fewer slots than tasks: every message
// reaches its recipient, also one that was not running when it was sent.
func TestMessagesAcrossPeers(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "m1", 1), startPeer(t, dir, "m2", 1), startPeer(t, dir, "m3", 2)}
	const ring = 7
	spec := writeSpec(t, dir, "m.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/vcprobe
params: {ring: %d}
timeout: 1m
tasks:
  - range: {param: index, from: 0, to: %d}
`, ring, ring-1))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for i := range ring {
		id := fmt.Sprintf("%04d", i)
		want := fmt.Sprintf("from %04d", (i+ring-1)%ring)
		if got := probeOutput(t, out, id).Received; got != want {
			t.Errorf("task %s received %q, want %q", id, got, want)
		}
	}
}

// A task that checkpoints is resumed from its latest checkpoint on
// another peer after its peer is SIGKILLed; partial results reach the
// report.
func TestCheckpointResumeAfterKill(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "c1", 1), startPeer(t, dir, "c2", 1)}
	spec := writeSpec(t, dir, "c.yaml", `
plugin: {{repo}}/plugins/vcprobe
tasks:
  - {id: long, params: {steps: 40, step_ms: 100, partials: true}}
`)
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers)}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a few checkpoints, then kill the peer running the task.
	victim := runningPeer(t, run, out, peers, 5)
	victim.proc.Kill()
	code, err := run.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.Stderr())
	}
	rep := readReport(t, out)
	task := rep.Tasks[0]
	last := task.Attempts[len(task.Attempts)-1]
	if task.State != report.TaskDone || !last.Resumed || last.Peer == victim.name {
		t.Fatalf("task %s: state %s, attempts %+v", task.ID, task.State, task.Attempts)
	}
	o := probeOutput(t, out, task.ID)
	if o.ResumedAt < 5 || o.Steps != 40 {
		t.Fatalf("resumed at step %d of %d, want >= 5 of 40", o.ResumedAt, o.Steps)
	}
	t.Logf("killed %s; resumed on %s at step %d (%d checkpoints, %d partials in the report)", victim.name, last.Peer, o.ResumedAt, task.Checkpoints, len(task.Partials))
}

// Increments racing with a peer's death: the task that loses its peer
// resumes from its checkpoint elsewhere and repeats the increments it made
// since; the coordinator replays their recorded results instead of
// applying them again. Every value 1..N is produced exactly once.
func TestGlobalsExactlyOnceAcrossKill(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; TestGlobalsLinearizable and TestCheckpointResumeAfterKill cover globals and kills in -short")
	}
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "x1", 1), startPeer(t, dir, "x2", 1), startPeer(t, dir, "x3", 1)}
	const tasks, each = 2, 120
	spec := writeSpec(t, dir, "x.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/vcprobe
params: {increments: %d, checkpoint_every: 25, increment_ms: 20, partials: true}
tasks:
  - range: {param: index, from: 0, to: %d}
`, each, tasks-1))
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "3", "--join", addrs(peers)}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the peer of task 0000 once it has checkpointed at least twice.
	victim := runningPeer(t, run, out, peers, 2)
	victim.proc.Kill()
	code, err := run.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.Stderr())
	}
	rep := readReport(t, out)
	var all []uint64
	for _, task := range rep.Tasks {
		all = append(all, probeOutput(t, out, task.ID).Increments...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i, v := range all {
		if v != uint64(i+1) {
			t.Fatalf("values are not exactly 1..%d (lost or applied twice): position %d holds %d; all: %v", tasks*each, i, v, all)
		}
	}
	if len(all) != tasks*each {
		t.Fatalf("%d values, want %d", len(all), tasks*each)
	}
	// The accepted attempt: a backup copy, canceled when it lost the
	// race, may come after it (a loaded machine).
	var last report.Attempt
	for _, a := range rep.Tasks[0].Attempts {
		if a.Outcome == report.OutcomeOK {
			last = a
		}
	}
	o := probeOutput(t, out, rep.Tasks[0].ID)
	if !last.Resumed || o.ResumedAt == 0 {
		t.Fatalf("task 0000 was not resumed: attempts %+v, resumed at %d", rep.Tasks[0].Attempts, o.ResumedAt)
	}
	t.Logf("killed %s; task 0000 resumed on %s at increment %d; %d values, exactly 1..%d", victim.name, last.Peer, o.ResumedAt, len(all), len(all))
}

// runningPeer waits until task 0 of the job writing to out has saved at
// least n checkpoints and emitted a partial result, and returns the peer
// that emitted it: the one running the task.
func runningPeer(t *testing.T, run *harness.Proc, out string, peers []*peer, n int) *peer {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if rep, err := jobdb.ReadReport(context.Background(), out); err == nil && len(rep.Tasks) > 0 && rep.Tasks[0].Checkpoints >= n && len(rep.Tasks[0].Partials) > 0 {
			who := rep.Tasks[0].Partials[len(rep.Tasks[0].Partials)-1].Peer
			for _, p := range peers {
				if p.name == who {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			run.Kill()
			t.Fatalf("task 0 made no %d checkpoints in time\n%s", n, run.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The shared state survives the submitter: `p2pc run` is SIGKILLed while
// tasks increment a global and checkpoint, and the rerun has the global's
// value, the op logs and the checkpoints back from the job database.
// Every value 1..N is produced exactly once over both runs (without the
// kept state the rerun would count from 0 again).
func TestSharedStateSurvivesSubmitterKill(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	const tasks, each = 6, 40
	spec := writeSpec(t, dir, "s.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/vcprobe
params: {increments: %d, checkpoint_every: 10, increment_ms: 10}
tasks:
  - range: {param: index, from: 0, to: %d}
`, each, tasks-1))
	out := filepath.Join(dir, "out")
	args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2", "--no-progress"}
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	// Kill it once a task is done and another has checkpointed.
	deadline := time.Now().Add(time.Minute)
	for {
		if rep, err := jobdb.ReadReport(context.Background(), out); err == nil && rep.Summary.Done >= 1 && rep.Summary.Done < tasks {
			if vcs := readVC(t, out); vcs != nil && len(vcs.Checkpoints) > rep.Summary.Done {
				break
			}
		}
		select {
		case <-run.Done():
			t.Fatalf("the run ended before it was killed\n%s", run.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no task done and another checkpointed within a minute")
		}
	}
	run.Kill()
	if _, err := run.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	kept := readVC(t, out)
	if g := kept.Globals["counter"]; g.Version < each {
		t.Fatalf("after the kill the database holds counter version %d, want at least %d", g.Version, each)
	}
	if r := p2pc(t, args[2:]...); r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	var all []uint64
	resumed := 0
	for _, task := range rep.Tasks {
		o := probeOutput(t, out, task.ID)
		all = append(all, o.Increments...)
		if o.ResumedAt > 0 {
			resumed++
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i, v := range all {
		if v != uint64(i+1) {
			t.Fatalf("values are not exactly 1..%d (the rerun lost the shared state): position %d holds %d; all: %v", tasks*each, i, v, all)
		}
	}
	if len(all) != tasks*each {
		t.Fatalf("%d values, want %d", len(all), tasks*each)
	}
	t.Logf("killed with counter at %d and %d checkpoints kept; %d tasks resumed from a checkpoint in the rerun", kept.Globals["counter"].Version, len(kept.Checkpoints), resumed)
}

// readVC reads the shared state kept in out's job database (nil if it
// cannot be read yet).
func readVC(t *testing.T, out string) *jobdb.VCState {
	t.Helper()
	db, err := jobdb.OpenReadOnly(context.Background(), filepath.Join(out, jobdb.FileName))
	if err != nil {
		return nil
	}
	defer db.Close()
	s, err := db.ReadVC(context.Background())
	if err != nil {
		return nil
	}
	return s
}
