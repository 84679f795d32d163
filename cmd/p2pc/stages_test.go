package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// readGraph reads the report.json of a job with stages in out.
func readGraph(t *testing.T, out string) *job.GraphReport {
	t.Helper()
	g, ok, err := job.ReadGraphReport(out)
	if err != nil || !ok {
		t.Fatalf("graph report in %s: ok %v, %v", out, ok, err)
	}
	return g
}

// stageOf is the report of stage name.
func stageOf(t *testing.T, g *job.GraphReport, name string) job.StageReport {
	t.Helper()
	for _, s := range g.Stages {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no stage %s in %+v", name, g.Stages)
	return job.StageReport{}
}

// fileIn reads out/rel, trimmed.
func fileIn(t *testing.T, out, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// ranOf says how many tasks each stage ran, as "square 6, total 1".
func ranOf(g *job.GraphReport) string {
	var parts []string
	for _, s := range g.Stages {
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, s.Ran))
	}
	return strings.Join(parts, ", ")
}

// The example from issue 33 and examples/squares.yaml: squares of 1 to 6,
// summed by a task that reads them under needs/square/<id>/sq.txt. A rerun
// runs no task.
func TestStagesSquares(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := filepath.Join(repoRoot, "examples", "squares.yaml")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := fileIn(t, out, "stages/total/tasks/sum/total.txt"); got != "91" {
		t.Errorf("total %q, want 91", got)
	}
	g := readGraph(t, out)
	if g.State != report.StateComplete || len(g.Tasks) != 7 || ranOf(g) != "square 6, total 1" {
		t.Errorf("report: state %s, %d tasks, ran %s", g.State, len(g.Tasks), ranOf(g))
	}
	for _, task := range g.Tasks {
		if task.Stage == "" || task.State != report.TaskDone || len(task.Files) != 1 {
			t.Errorf("task %+v", task)
		}
	}
	db, err := jobdb.OpenReadOnly(context.Background(), filepath.Join(out, "stages", "total", jobdb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.JobValue(context.Background(), jobdb.StageKey); err != nil || v != "squares/total" {
		t.Errorf("stage total's job database names it %q (%v)", v, err)
	}
	db.Close()
	st := p2pc(t, "status", out)
	if st.code != 0 || !strings.Contains(st.stdout, "job squares complete: 2 stages") || !strings.Contains(st.stdout, "stage total: complete, 1/1 done") {
		t.Errorf("status: exit %d\n%s", st.code, st.stdout)
	}
	for _, cmd := range []string{"report", "export", "logs"} {
		if r := p2pc(t, cmd, out); r.code != exitBadInput || !strings.Contains(r.stderr, "holds a job with stages") {
			t.Errorf("p2pc %s on the graph's folder: exit %d\n%s", cmd, r.code, r.stderr)
		}
	}
	if r := p2pc(t, "report", filepath.Join(out, "stages", "square"), "--stdout"); r.code != 0 || !strings.Contains(r.stdout, "sq.txt") {
		t.Errorf("p2pc report of a stage: exit %d\n%s", r.code, r.stderr)
	}
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	if g := readGraph(t, out); ranOf(g) != "square 0, total 0" || stageOf(t, g, "square").Reused != 6 || stageOf(t, g, "total").Reused != 1 {
		t.Errorf("rerun ran %s, want none: %+v", ranOf(g), g.Stages)
	}
}

// The same example on two peers (the submitter runs no task): the
// upstream outputs travel to the peers as blocks.
func TestStagesSquaresOnPeers(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "a", 2, 2), startPeerOnHost(t, dir, "b", 3, 2)}
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "pipe.yaml", pipeSpec("pipe", 6, "true"))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkPipe(t, out, 6)
	g := readGraph(t, out)
	if ranOf(g) != "square 6, double 6, pairs 3, total 1" {
		t.Errorf("ran %s", ranOf(g))
	}
	// A peer fetches the upstream outputs its leases need, not the whole
	// upstream stage's: the squares, inputs of the doubles' own, are
	// fetched at most once per attempt of a double.
	fetched := 0
	for _, p := range []string{"a", "b"} {
		filepath.WalkDir(filepath.Join(dir, p), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(filepath.ToSlash(path), "/inputs/needs/square/") {
				fetched++
			}
			return nil
		})
	}
	attempts := 0
	for _, task := range readReport(t, filepath.Join(out, "stages", "double")).Tasks {
		attempts += len(task.Attempts)
	}
	if fetched == 0 || fetched > attempts {
		t.Errorf("the peers fetched %d squares for %d attempts of the doubles", fetched, attempts)
	}
}

// pipeSpec is a four-stage graph over n squares (n even): square i,
// double each square (edge each), add pairs of doubles (group 2), sum the
// pairs (edge all). fail is a shell command run by square first.
func pipeSpec(name string, n int, fail string) string {
	return fmt.Sprintf(`name: %s
params: {shell: true, stdout: false}
retries: 0
stages:
  - name: square
    plugin: {{repo}}/plugins/exec
    params: {outputs: [sq.txt], command: ["%s; echo $((P2PC_PARAM_I * P2PC_PARAM_I)) > sq.txt"]}
    tasks:
      - range: {param: i, from: 1, to: %d}
  - name: double
    needs: [{stage: square, edge: each}]
    plugin: {{repo}}/plugins/exec
    params: {outputs: [d.txt], command: ["test $(ls needs/square | wc -l) = 1 && echo $(( $(cat needs/square/*/sq.txt) * 2 )) > d.txt"]}
    tasks:
      - range: {param: i, from: 1, to: %d}
  - name: pairs
    needs: [{stage: double, group: 2}]
    plugin: {{repo}}/plugins/exec
    params: {outputs: [p.txt], command: ["test $(ls needs/double | wc -l) = 2 && cat needs/double/*/d.txt | awk '{s+=$1} END {print s}' > p.txt"]}
    tasks:
      - range: {param: k, from: 1, to: %d}
  - name: total
    needs: [pairs]
    plugin: {{repo}}/plugins/exec
    tasks:
      - id: sum
        params: {outputs: [total.txt], command: ["cat needs/pairs/*/p.txt | awk '{s+=$1} END {print s}' > total.txt"]}
`, name, fail, n, n, n/2)
}

// checkPipe checks pipeSpec's outputs: each double, each pair sum, the total.
func checkPipe(t *testing.T, out string, n int) {
	t.Helper()
	total := 0
	for i := 1; i <= n; i++ {
		if got, want := fileIn(t, out, fmt.Sprintf("stages/double/tasks/%04d/d.txt", i-1)), fmt.Sprint(2*i*i); got != want {
			t.Errorf("double %d: %s, want %s", i, got, want)
		}
		total += 2 * i * i
	}
	for k := 0; k < n/2; k++ {
		a, b := 2*k+1, 2*k+2
		if got, want := fileIn(t, out, fmt.Sprintf("stages/pairs/tasks/%04d/p.txt", k)), fmt.Sprint(2*a*a+2*b*b); got != want {
			t.Errorf("pair %d: %s, want %s", k, got, want)
		}
	}
	if got := fileIn(t, out, "stages/total/tasks/sum/total.txt"); got != fmt.Sprint(total) {
		t.Errorf("total %s, want %d", got, total)
	}
}

// An each pipeline and a group reduce tree, locally: every downstream task
// sees exactly the upstream outputs it needs (the commands check how many).
func TestStagesEachAndGroup(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "pipe.yaml", pipeSpec("pipe", 8, "true"))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkPipe(t, out, 8)
	if g := readGraph(t, out); ranOf(g) != "square 8, double 8, pairs 4, total 1" {
		t.Errorf("ran %s", ranOf(g))
	}
}

// A failed upstream task blocks what needs it, with its reason: with
// on_failure: continue everything else runs; with the default (stop)
// no task is released once a task failed (square/0000 fails before any
// is accepted: nothing downstream runs).
func TestStagesFailureBlocks(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	for _, c := range []struct {
		policy    string
		fail      int // the square that fails (1-based)
		ran       string
		blockedBy map[string]string // task -> part of its reason
	}{
		{"continue", 3, "square 6, double 5, pairs 2, total 0", map[string]string{
			"double/0002": "upstream task square/0002 failed",
			"pairs/0001":  "upstream task square/0002 failed",
			"total/sum":   "upstream task square/0002 failed",
		}},
		{"stop", 1, "square 6, double 0, pairs 0, total 0", map[string]string{
			"double/0000": "upstream task square/0000 failed",
			"double/0001": "stage square had failed tasks",
			"pairs/0002":  "stage square had failed tasks",
			"total/sum":   "upstream task square/0000 failed",
		}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			// The other squares take a while: none is accepted before the
			// failure is known.
			body := pipeSpec("fails", 6, fmt.Sprintf(`test $P2PC_PARAM_I != %d || { echo boom >&2; exit 1; }; sleep 0.2`, c.fail))
			failed := fmt.Sprintf("square/%04d", c.fail-1)
			out := filepath.Join(dir, c.policy)
			spec := writeSpec(t, dir, c.policy+".yaml", "on_failure: "+c.policy+"\n"+body)
			r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
			if r.code != exitTaskFailed {
				t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
			}
			g := readGraph(t, out)
			if g.State != report.StateFailed || ranOf(g) != c.ran {
				t.Errorf("state %s, ran %s; want failed, %s", g.State, ranOf(g), c.ran)
			}
			states := map[string]job.GraphTask{}
			for _, task := range g.Tasks {
				states[task.Stage+"/"+task.ID] = task
			}
			if task := states[failed]; task.State != report.TaskFailed {
				t.Errorf("%s: %+v", failed, task)
			}
			for id, why := range c.blockedBy {
				if task := states[id]; task.State != job.BlockedState || !strings.Contains(task.Error, why) {
					t.Errorf("%s: %s %q, want blocked by %q", id, task.State, task.Error, why)
				}
			}
			st := p2pc(t, "status", out)
			if st.code != exitTaskFailed || !strings.Contains(st.stdout, "stage square: failed, 5/6 done, 1 failed") || !strings.Contains(st.stdout, "stage total: not started, 1 blocked") {
				t.Errorf("status: exit %d\n%s", st.code, st.stdout)
			}
			if c.policy == "continue" {
				if got := fileIn(t, out, "stages/pairs/tasks/0000/p.txt"); got != fmt.Sprint(2*1+2*4) {
					t.Errorf("pair 0: %s", got)
				}
			}
			// Fixed, the job runs what failed and what it blocked, and
			// nothing that was done.
			fixed := "on_failure: " + c.policy + "\n" + pipeSpec("fails", 6, "true")
			writeSpec(t, dir, c.policy+".yaml", fixed)
			if r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2"); r.code != 0 {
				t.Fatalf("fixed: exit %d\n%s", r.code, r.stderr)
			}
			checkPipe(t, out, 6)
			want := map[string]string{"continue": "square 6, double 1, pairs 1, total 1", "stop": "square 6, double 6, pairs 3, total 1"}[c.policy]
			if g := readGraph(t, out); ranOf(g) != want {
				t.Errorf("fixed: ran %s, want %s", ranOf(g), want)
			}
			if !strings.Contains(r.stderr, "blocked") {
				t.Errorf("the summary does not say what was blocked:\n%s", r.stderr)
			}
		})
	}
}

// Editing one task of the first stage reruns exactly what needs it; an
// edit that leaves its output as it was reruns nothing downstream.
func TestStagesRerunClosure(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	body := pipeSpec("closure", 6, "true")
	spec := writeSpec(t, dir, "c.yaml", body)
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Task 0002 (i = 3) now squares 7: its double, its pair and the total
	// run again, nothing else.
	edited := strings.Replace(body, "      - range: {param: i, from: 1, to: 6}\n  - name: double",
		"      - range: {param: i, from: 1, to: 2}\n      - {id: \"0002\", params: {i: 7}}\n      - range: {param: i, from: 4, to: 6}\n  - name: double", 1)
	if edited == body {
		t.Fatal("edit did not apply")
	}
	writeSpec(t, dir, "c.yaml", edited)
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("edited: exit %d\n%s", r.code, r.stderr)
	}
	if g := readGraph(t, out); ranOf(g) != "square 1, double 1, pairs 1, total 1" {
		t.Errorf("edited run ran %s, want its closure only", ranOf(g))
	}
	if got := fileIn(t, out, "stages/double/tasks/0002/d.txt"); got != "98" {
		t.Errorf("double of the edited task: %s", got)
	}
	// i = -7 squares to the same 49: the task runs again, and nothing
	// downstream of it, whose inputs are unchanged.
	writeSpec(t, dir, "c.yaml", strings.Replace(edited, "{i: 7}", "{i: -7}", 1))
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("same output: exit %d\n%s", r.code, r.stderr)
	}
	if g := readGraph(t, out); ranOf(g) != "square 1, double 0, pairs 0, total 0" {
		t.Errorf("an edit with the same output ran %s", ranOf(g))
	}
}

// A graph that is not one is refused before anything runs, with the
// place of each problem.
func TestStagesValidation(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "bad.yaml", `name: bad
stages:
  - name: a
    plugin: {{repo}}/plugins/exec
    needs: [b]
    tasks: [{range: {param: i, from: 1, to: 3}}]
  - name: b
    plugin: {{repo}}/plugins/exec
    needs: [{stage: a, edge: each}, nowhere]
    tasks: [{range: {param: i, from: 1, to: 4}}]
`)
	for _, cmd := range []string{"run", "validate"} {
		r := p2pc(t, cmd, spec, "--out", filepath.Join(dir, "out"), "--no-mdns")
		if cmd == "validate" {
			r = p2pc(t, cmd, spec)
		}
		if r.code != exitBadInput {
			t.Errorf("%s: exit %d, want %d\n%s", cmd, r.code, exitBadInput, r.stderr)
		}
		for _, want := range []string{
			"bad.yaml:9:13: needs: edge each between stages of different sizes",
			"bad.yaml:9:37: needs: unknown stage \"nowhere\"",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", cmd, want, r.stderr)
			}
		}
	}
	cyc := writeSpec(t, dir, "cycle.yaml", `stages:
  - name: a
    plugin: {{repo}}/plugins/exec
    needs: [b]
    tasks: [{id: x}]
  - name: b
    plugin: {{repo}}/plugins/exec
    needs: [a]
    tasks: [{id: x}]
`)
	if r := p2pc(t, "validate", cyc); r.code != exitBadInput || !strings.Contains(r.stderr, "cycle.yaml:8:13: needs: cycle: a needs b needs a") {
		t.Errorf("cycle: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "run", filepath.Join(repoRoot, "examples", "squares.yaml"), "--detach", "--no-mdns"); r.code != exitBadInput || !strings.Contains(r.stderr, "--detach does not carry a job with stages") {
		t.Errorf("--detach: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a refused graph made its output folder: %v", err)
	}
}

// SIGKILL of the submitter in the middle of a graph, then the same
// command again: no task that was accepted runs again, and the outputs are
// those of a run never killed.
func TestStagesSubmitterKilled(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "k.yaml", `name: killed
params: {shell: true, stdout: false}
stages:
  - name: a
    plugin: {{repo}}/plugins/exec
    params: {outputs: [a.txt], command: ["echo $P2PC_PARAM_I > a.txt"]}
    tasks: [{range: {param: i, from: 1, to: 4}}]
  - name: b
    needs: [{stage: a, edge: each}]
    plugin: {{repo}}/plugins/exec
    params: {outputs: [b.txt], command: ["sleep 0.4; echo $(( $(cat needs/a/*/a.txt) + 10 )) > b.txt"]}
    tasks: [{range: {param: i, from: 1, to: 4}}]
  - name: c
    needs: [b]
    plugin: {{repo}}/plugins/exec
    tasks: [{id: sum, params: {outputs: [c.txt], command: ["cat needs/b/*/b.txt | awk '{s+=$1} END {print s}' > c.txt"]}}]
`)
	out := filepath.Join(dir, "out")
	args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1", "--no-progress"}
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	// Kill it once stage b has accepted a task, and before it is over.
	killOnceDone(t, run, filepath.Join(out, "stages", "b"), "stage b")
	// What each stage's job database holds as done is accepted: no such
	// task runs again. (Stage a's tasks stream into b's: some of a may
	// have been running, or done and not yet committed, at the kill.)
	before := map[string]map[string]report.Task{}
	for _, st := range []string{"a", "b"} {
		before[st] = map[string]report.Task{}
		for _, task := range dbTaskList(t, filepath.Join(out, "stages", st)) {
			if task.State == report.TaskDone {
				before[st][task.ID] = task
			}
		}
	}
	if n := len(before["b"]); n == 0 || n == 4 {
		t.Fatalf("killed with %d of 4 tasks of stage b done", n)
	}
	r := p2pc(t, args[2:]...)
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	g := readGraph(t, out)
	for _, st := range []string{"a", "b"} {
		if s, n := stageOf(t, g, st), len(before[st]); s.Ran != 4-n || s.Reused != n {
			t.Errorf("rerun after the kill ran %s; stage %s reused %d, and %d of it were done", ranOf(g), st, s.Reused, n)
		}
	}
	if got := fileIn(t, out, "stages/c/tasks/sum/c.txt"); got != fmt.Sprint(1+2+3+4+40) {
		t.Errorf("c = %s", got)
	}
	for _, st := range []string{"a", "b"} {
		for _, task := range readReport(t, filepath.Join(out, "stages", st)).Tasks {
			ok := 0
			for _, a := range task.Attempts {
				if a.Outcome == report.OutcomeOK {
					ok++
				}
			}
			if prev, was := before[st][task.ID]; was {
				if task.Digest != prev.Digest || len(task.Attempts) != len(prev.Attempts) {
					t.Errorf("task %s/%s: done before the kill, changed by the rerun: %d attempts, were %d", st, task.ID, len(task.Attempts), len(prev.Attempts))
				}
			} else if ok != 1 {
				t.Errorf("task %s/%s: %d successful attempts", st, task.ID, ok)
			}
		}
	}
}

// dbTaskList is the tasks of the job in out, from its job database.
func dbTaskList(t *testing.T, out string) []report.Task {
	t.Helper()
	var tasks []report.Task
	err := dbTasks(context.Background(), out)(func(task *report.Task) error {
		tasks = append(tasks, *task)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// examples/pipeline.yaml (render, thumbnails, stitch) gives the image of
// its single-stage equivalent, examples/render.yaml, byte for byte.
func TestStagesPipelineExample(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	pipe, single := filepath.Join(dir, "pipe"), filepath.Join(dir, "single")
	if r := p2pc(t, "run", filepath.Join(repoRoot, "examples", "pipeline.yaml"), "--out", pipe, "--no-mdns", "--local-slots", "2"); r.code != 0 {
		t.Fatalf("pipeline: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "run", filepath.Join(repoRoot, "examples", "render.yaml"), "--out", single, "--no-mdns", "--local-slots", "2"); r.code != 0 {
		t.Fatalf("render: exit %d\n%s", r.code, r.stderr)
	}
	image := fileIn(t, pipe, "stages/stitch/tasks/image/image.pgm")
	if want := fileIn(t, single, "image.pgm"); image != want || len(strings.Split(image, "\n")) != 3+64 {
		t.Errorf("the pipeline's image (%d lines) differs from render.yaml's (%d lines)", len(strings.Split(image, "\n")), len(strings.Split(want, "\n")))
	}
	thumb := strings.Split(fileIn(t, pipe, "stages/stitch/tasks/image/thumb.pgm"), "\n")
	if len(thumb) != 3+32 || thumb[1] != "32 32" || len(strings.Fields(thumb[3])) != 32 {
		t.Errorf("thumbnail: %d lines, header %q", len(thumb), thumb[:2])
	}
}

// A job with stages refuses a folder that holds a job without stages,
// and leaves it as it was.
func TestStagesRefuseFlatFolder(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	flat := writeSpec(t, dir, "flat.yaml", sweepSpec("flat", "0", []sweepTask{{"a", 1}}))
	if r := p2pc(t, "run", flat, "--out", out, "--no-mdns"); r.code != 0 {
		t.Fatalf("flat: exit %d\n%s", r.code, r.stderr)
	}
	before, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := p2pc(t, "run", filepath.Join(repoRoot, "examples", "squares.yaml"), "--out", out, "--no-mdns")
	if r.code != exitBadInput || !strings.Contains(r.stderr, "holds a job without stages") {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(out, "report.json")); string(after) != string(before) {
		t.Error("the flat job's report.json changed")
	}
	if _, err := os.Stat(filepath.Join(out, "stages")); !os.IsNotExist(err) {
		t.Errorf("stages made in the flat job's folder: %v", err)
	}
}

// Upstream outputs kept inline in a stage's job database (echo's data)
// reach the tasks downstream as files all the same, locally and on a peer.
func TestStagesInlineOutputs(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "inline.yaml", `name: inline
stages:
  - name: e
    plugin: {{repo}}/plugins/echo
    tasks: [{range: {param: n, from: 1, to: 3}}]
  - name: c
    needs: [{stage: e, edge: each}]
    plugin: {{repo}}/plugins/exec
    params: {shell: true, stdout: false, outputs: [n.txt], command: ["grep -o '\"n\":[0-9]*' needs/e/*/data > n.txt"]}
    tasks: [{range: {param: n, from: 1, to: 3}}]
`)
	peers := []*peer{startPeerOnHost(t, dir, "p", 2, 2)}
	for _, where := range [][]string{{"--local-slots", "2"}, {"--local-slots", "0", "--join", addrs(peers)}} {
		out := filepath.Join(dir, "out-"+where[1])
		r := p2pc(t, append([]string{"run", spec, "--out", out, "--no-mdns"}, where...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", where, r.code, r.stderr)
		}
		for i := 1; i <= 3; i++ {
			if got := fileIn(t, out, fmt.Sprintf("stages/c/tasks/%04d/n.txt", i-1)); got != fmt.Sprintf(`"n":%d`, i) {
				t.Errorf("%v: task %d saw %q", where, i, got)
			}
		}
	}
	// A written-out inline output cut short (a crash while it was
	// written) is written again by the next run.
	out := filepath.Join(dir, "out-2") // the local run
	data := filepath.Join(out, ".p2pc", "inline", "e", "0001.data")
	want, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, want[:1], 0o644); err != nil {
		t.Fatal(err)
	}
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns"); r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(data); string(got) != string(want) {
		t.Errorf("inline output after the rerun: %q, want %q", got, want)
	}
}

// An `each` edge streams: task n downstream starts as soon as task n
// upstream is accepted (its record committed to its stage's job
// database), not when the whole upstream stage is over. Square 0000
// sleeps; the doubles of the others start (their first attempt, from
// the stage's report) within 100 ms (median) of their square's row being
// written (its job.db time), and square 0000 waits (20 s at most) until
// their outputs are in place: a graph that did not stream would not have
// them before it ends.
func TestStagesEachStreams(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	wait := fmt.Sprintf("test $P2PC_PARAM_I != 1 || for k in $(seq 200); do test $(ls %s 2>/dev/null | wc -l) -ge 5 && break; sleep 0.1; done", filepath.Join(out, "stages", "double", "tasks"))
	spec := writeSpec(t, dir, "s.yaml", pipeSpec("streams", 6, wait))
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "4", "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkPipe(t, out, 6)
	accepted := acceptedAt(t, filepath.Join(out, "stages", "square"))
	squares := readReport(t, filepath.Join(out, "stages", "square")).Tasks
	doubles := readReport(t, filepath.Join(out, "stages", "double")).Tasks
	slowEnd := squares[0].Attempts[len(squares[0].Attempts)-1].End
	var gaps []time.Duration
	for n := 1; n < 6; n++ {
		down := doubles[n]
		if len(down.Attempts) == 0 {
			t.Fatalf("double %s did not run", down.ID)
		}
		start := down.Attempts[0].Start
		if !start.Before(slowEnd) {
			t.Errorf("double %s started at %s, after the slow square's end at %s: the stage waited for the whole upstream stage", down.ID, start.Format(time.StampMilli), slowEnd.Format(time.StampMilli))
		}
		gaps = append(gaps, start.Sub(accepted[squares[n].ID]))
	}
	slices.Sort(gaps)
	t.Logf("from a square's acceptance to its double's start: %v (load %s; the machine is shared)", gaps, loadAvg())
	if med := gaps[len(gaps)/2]; med > 100*time.Millisecond {
		t.Errorf("median from a square's acceptance to its double's start %s, want at most 100ms: %v", med, gaps)
	}
}

// acceptedAt is when each done task's row was last written in the job
// database of out (its commit: the task is accepted for good then).
func acceptedAt(t *testing.T, out string) map[string]time.Time {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(out, jobdb.FileName)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, updated FROM tasks WHERE state = 'done'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	at := map[string]time.Time{}
	for rows.Next() {
		var id, updated string
		if err := rows.Scan(&id, &updated); err != nil {
			t.Fatal(err)
		}
		if at[id], err = time.Parse(jobdb.TimeFormat, updated); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return at
}

// loadAvg is the machine's load (/proc/loadavg), for the log.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
