package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// queensSpec is an N-queens fork tree (plugins/nqueens): board n, split
// rows into child tasks, each leaf taking leafMS at least, with the
// spec's other keys in extra (spawn: among them).
func queensSpec(n, split, leafMS int, extra string) string {
	return fmt.Sprintf(`name: queens
plugin: {{repo}}/plugins/nqueens
timeout: 1m
params: {n: %d, split: %d, leaf_ms: %d}
%s
tasks:
  - id: q
`, n, split, leafMS, extra)
}

// readFork reads the report.json of a fork tree in out.
func readFork(t *testing.T, out string) *job.ForkReport {
	t.Helper()
	f, ok, err := job.ReadForkReport(out)
	if err != nil || !ok {
		t.Fatalf("fork report in %s: ok %v, %v", out, ok, err)
	}
	return f
}

// forkTask is task id of the tree.
func forkTask(t *testing.T, f *job.ForkReport, id string) job.ForkTask {
	t.Helper()
	for _, task := range f.Tasks {
		if task.ID == id {
			return task
		}
	}
	t.Fatalf("no task %s in the tree", id)
	return job.ForkTask{}
}

// rootCount is the count the tree's root task q returned.
func rootCount(t *testing.T, out string, f *job.ForkReport) string {
	t.Helper()
	q := forkTask(t, f, "q")
	if q.State != report.TaskDone || len(q.Files) != 1 {
		t.Fatalf("root task: %+v", q)
	}
	return fileIn(t, out, q.Files[0])
}

// ranIn sums the calls the rounds of a tree ran and reused.
func ranIn(f *job.ForkReport) (ran, reused int) {
	for _, r := range f.Rounds {
		ran, reused = ran+r.Ran, reused+r.Reused
	}
	return ran, reused
}

// queens8 and queens6 are what an N-queens count split 4 rows deep gives:
// the count, and the tasks at depths 0 to 4.
var (
	queens8 = queensTree{n: 8, count: "92", perDepth: "[1 8 42 140 344]"}
	queens6 = queensTree{n: 6, count: "4", perDepth: "[1 6 20 36 46]"}
)

type queensTree struct {
	n               int
	count, perDepth string
}

// checkQueensTree checks the tree of an N-queens count split 4 rows deep:
// its count and its tasks at each depth, every parent suspended once and
// resumed once, each task's children recorded in its report and in the
// job database of the round that ran it.
func checkQueensTree(t *testing.T, out string, f *job.ForkReport, want queensTree) {
	t.Helper()
	if f.State != report.StateComplete {
		t.Fatalf("tree %s", f.State)
	}
	if got := rootCount(t, out, f); got != want.count {
		t.Errorf("%d queens: %s solutions, want %s", want.n, got, want.count)
	}
	perDepth := make([]int, 5)
	parents := map[string]string{}
	for _, task := range f.Tasks {
		if task.Depth > 4 || task.State != report.TaskDone {
			t.Fatalf("task %+v", task)
		}
		perDepth[task.Depth]++
		for _, c := range task.Children {
			parents[c] = task.ID
		}
		wantRounds := 2
		if task.Depth == 4 {
			wantRounds = 1
		}
		if len(task.Rounds) != wantRounds || (task.Depth < 4) != (len(task.Children) > 0) {
			t.Errorf("task %s at depth %d: rounds %v, %d children", task.ID, task.Depth, task.Rounds, len(task.Children))
		}
	}
	if fmt.Sprint(perDepth) != want.perDepth || len(f.Rounds) != 9 {
		t.Errorf("tasks per depth %v in %d rounds, want %s in 9", perDepth, len(f.Rounds), want.perDepth)
	}
	for _, task := range f.Tasks {
		if parents[task.ID] != task.Parent {
			t.Errorf("task %s: parent %q, listed as a child of %q", task.ID, task.Parent, parents[task.ID])
		}
	}
	// Round 1 ran the root's children: its job database has their rows.
	db, err := jobdb.OpenReadOnly(context.Background(), filepath.Join(out, "rounds", "1", jobdb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Tree(context.Background())
	if err != nil || len(rows) != want.n {
		t.Fatalf("round 1's tree: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Parent != "q" || r.Depth != 1 || !r.Suspended || strings.Join(r.Children, " ") != strings.Join(forkTask(t, f, r.Task).Children, " ") {
			t.Errorf("round 1's row %+v", r)
		}
	}
}

// A fork tree of depth 4 on 2 slots: the parents waiting for their
// children hold no slot, so it finishes, with the known count. A rerun
// runs no call again.
func TestForkQueens(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "q.yaml", queensSpec(8, 4, 0, "spawn: {max_depth: 4}"))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2", "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	f := readFork(t, out)
	checkQueensTree(t, out, f, queens8)
	if ran, reused := ranIn(f); ran != 535+535-344 || reused != 0 {
		t.Errorf("ran %d calls, reused %d; want %d, 0", ran, reused, 535+535-344)
	}
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2", "--no-progress")
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	f = readFork(t, out)
	checkQueensTree(t, out, f, queens8)
	if ran, reused := ranIn(f); ran != 0 || reused != 535+535-344 {
		t.Errorf("rerun ran %d calls, reused %d", ran, reused)
	}
	if r := p2pc(t, "status", out); r.code != 0 || !strings.Contains(r.stdout, "job queens complete: a fork tree, 9 rounds, 535 tasks") || !strings.Contains(r.stdout, "round 8: complete, 1/1 done") {
		t.Errorf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A tree of the same depth on two peers, the submitter running no task,
// every call verified by two replicas on distinct hosts (a 6-board: 109
// tasks, 172 calls, each run twice).
func TestForkQueensOnPeers(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "a", 2, 2), startPeerOnHost(t, dir, "b", 3, 2)}
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "q.yaml", queensSpec(6, 4, 0, "spawn: {max_depth: 4}\nverify: {replicas: 2}"))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers), "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	f := readFork(t, out)
	checkQueensTree(t, out, f, queens6)
	// Each call was accepted on two agreeing votes, one from each peer.
	for _, task := range readReport(t, filepath.Join(out, "rounds", "4")).Tasks {
		if len(task.Votes) != 2 || task.Votes[0].Peer == task.Votes[1].Peer {
			t.Fatalf("round 4, task %s: votes %+v", task.ID, task.Votes)
		}
	}
}

// A runaway fork stops at spawn.max_depth: the task that spawns too deep
// fails, naming the limit, and its ancestors fail with it.
func TestForkMaxDepth(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "q.yaml", queensSpec(6, 6, 0, "spawn: {max_depth: 2}"))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2", "--no-progress")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	f := readFork(t, out)
	if f.State != report.StateFailed {
		t.Errorf("tree %s", f.State)
	}
	deep := 0
	for _, task := range f.Tasks {
		if task.Depth > 2 {
			t.Errorf("task %s at depth %d ran", task.ID, task.Depth)
		}
		if task.Depth == 2 && task.State == report.TaskFailed {
			deep++
			if want := fmt.Sprintf("spawn: task %s at depth 2 spawned children, beyond the job's max_depth 2 (spawn.max_depth in the spec)", task.ID); task.Error != want {
				t.Errorf("task %s: error %q, want %q", task.ID, task.Error, want)
			}
		}
	}
	q := forkTask(t, f, "q")
	if deep == 0 || q.State != report.TaskFailed || !strings.Contains(q.Error, "beyond the job's max_depth 2") || !strings.Contains(r.stderr, "max_depth 2") {
		t.Errorf("%d tasks at depth 2 failed; root %+v\n%s", deep, q, r.stderr)
	}
	// Without spawn: a task that spawns fails, saying why.
	noSpawn := writeSpec(t, dir, "flat.yaml", "name: flat\nplugin: {{repo}}/plugins/nqueens\nparams: {n: 6, split: 2}\nretries: 0\ntasks: [{id: q}]\n")
	r = p2pc(t, "run", noSpawn, "--out", filepath.Join(dir, "flat"), "--no-mdns", "--local-slots", "1", "--no-progress")
	if r.code != exitTaskFailed || !strings.Contains(r.stderr, "may not spawn children (the spec has no spawn: section)") {
		t.Errorf("a job without spawn: exit %d\n%s", r.code, r.stderr)
	}
}

// SIGKILL of the submitter in the middle of the tree, then the same
// command again: the tree ends as a run never killed would, and no call
// accepted before the kill runs again.
func TestForkSubmitterKilled(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// The leaves take 10 ms each, one at a time: the kill lands among them.
	spec := writeSpec(t, dir, "q.yaml", queensSpec(8, 4, 10, "spawn: {max_depth: 4}\nbatch: off"))
	args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1", "--no-progress"}
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	// Kill it once round 4 (the leaves) has accepted a task.
	killOnceDone(t, run, filepath.Join(out, "rounds", "4"), "round 4")
	before := 0
	for _, task := range dbTaskList(t, filepath.Join(out, "rounds", "4")) {
		if task.State == report.TaskDone {
			before++
		}
	}
	if before == 0 || before == 344 {
		t.Fatalf("killed with %d of 344 leaves done", before)
	}
	if r := p2pc(t, "status", out); r.code != exitIncomplete || !strings.Contains(r.stdout, "interrupted: a fork tree, 5 rounds") || !strings.Contains(r.stdout, "round 4: interrupted") {
		t.Errorf("status after the kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := p2pc(t, args[2:]...)
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	f := readFork(t, out)
	checkQueensTree(t, out, f, queens8)
	for _, rr := range f.Rounds[:4] {
		if rr.Ran != 0 {
			t.Errorf("rerun: round %d ran %d calls", rr.Round, rr.Ran)
		}
	}
	if rr := f.Rounds[4]; rr.Reused != before || rr.Ran != 344-before {
		t.Errorf("rerun: round 4 ran %d, reused %d; %d were done", rr.Ran, rr.Reused, before)
	}
	for _, task := range readReport(t, filepath.Join(out, "rounds", "4")).Tasks {
		ok := 0
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK {
				ok++
			}
		}
		if ok != 1 {
			t.Errorf("leaf %s: %d successful attempts", task.ID, ok)
		}
	}
}

// The spawn limits are checked with the spec's positions.
func TestForkValidation(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "bad.yaml", `name: bad
plugin: {{repo}}/plugins/nqueens
spawn: {max_depth: 0, max_children: many, width: 2}
reduce: true
tasks: [{id: q}]
`)
	r := p2pc(t, "validate", spec)
	if r.code != exitBadInput {
		t.Errorf("exit %d, want %d\n%s", r.code, exitBadInput, r.stderr)
	}
	for _, want := range []string{
		"bad.yaml:3:20: spawn.max_depth: must be between 1 and 64, got 0",
		"bad.yaml:3:37: spawn.max_children: expected an integer",
		"bad.yaml:3:43: unknown key \"width\" in spawn",
		"bad.yaml:4:1: reduce: a job whose tasks spawn has none",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("validate made an output folder: %v", err)
	}
	example := filepath.Join(repoRoot, "examples", "nqueens.yaml")
	if r := p2pc(t, "validate", example); r.code != 0 || !strings.Contains(r.stderr+r.stdout, "(nqueens 1)") {
		t.Errorf("examples/nqueens.yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for flag, want := range map[string]string{
		"--ui":     "--ui: the web view does not show a job whose tasks spawn",
		"--detach": "--detach does not carry a job whose tasks spawn",
	} {
		args := []string{"run", example, "--out", filepath.Join(dir, "out"), "--no-mdns", flag}
		if flag == "--ui" {
			args = append(args, "127.0.0.1:0")
		}
		if r := p2pc(t, args...); r.code != exitBadInput || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d\n%s", flag, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a refused run made its output folder: %v", err)
	}
}

// killOnceDone kills run (SIGKILL) as soon as the job in dir (what, in
// messages) has accepted a task, and waits for it to end; it fails the
// test if the run ends first or nothing is accepted within a minute.
func killOnceDone(t *testing.T, run *harness.Proc, dir, what string) {
	t.Helper()
	path := filepath.Join(dir, jobdb.FileName)
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for done := 0; done == 0; {
		if time.Now().After(deadline) {
			run.Kill()
			t.Fatalf("%s accepted no task within 60s\n%s", what, run.Stderr())
		}
		select {
		case <-run.Done():
			t.Fatalf("the run ended before it was killed\n%s", run.Stderr())
		case <-tick.C:
		}
		if db, err := jobdb.OpenReadOnly(context.Background(), path); err == nil {
			if s, err := db.Status(context.Background(), time.Now(), time.Minute, 0); err == nil {
				done = s.Done
			}
			db.Close()
		}
	}
	run.Kill()
	if _, err := run.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}
