package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// sweepTask is a task of sweepSpec: its output tasks/<id>/out.txt holds v.
type sweepTask struct {
	id string
	v  int
}

// sweepSpec is a job of exec tasks that each write their param v to
// out.txt (a task folder each), after sleeping sleep seconds.
func sweepSpec(name string, sleep string, tasks []sweepTask) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nplugin: {{repo}}/plugins/exec\n", name)
	fmt.Fprintf(&b, "params: {shell: true, stdout: false, outputs: [out.txt], command: [\"sleep %s; echo $P2PC_PARAM_V > out.txt\"]}\ntasks:\n", sleep)
	for _, t := range tasks {
		fmt.Fprintf(&b, "  - {id: %s, params: {v: %d}}\n", t.id, t.v)
	}
	return b.String()
}

// byID is a report's tasks by ID.
func byID(rep *report.Report) map[string]report.Task {
	m := map[string]report.Task{}
	for _, t := range rep.Tasks {
		m[t.ID] = t
	}
	return m
}

// checkSweep checks that the output folder holds a folder for each task
// of tasks, with its value, and no other, and that the report lists
// exactly these tasks, done.
func checkSweep(t *testing.T, out string, tasks []sweepTask) *report.Report {
	t.Helper()
	rep := readReport(t, out)
	if rep.State != report.StateComplete || rep.Summary.Total != len(tasks) || rep.Summary.Done != len(tasks) || len(rep.Tasks) != len(tasks) {
		t.Fatalf("report: state %s, %d of %d done, %d tasks; want %d", rep.State, rep.Summary.Done, rep.Summary.Total, len(rep.Tasks), len(tasks))
	}
	var want, got []string
	for i, task := range tasks {
		want = append(want, task.id)
		if rep.Tasks[i].ID != task.id || rep.Tasks[i].State != report.TaskDone {
			t.Errorf("report task %d: %s %s, want %s done", i, rep.Tasks[i].ID, rep.Tasks[i].State, task.id)
		}
		b, err := os.ReadFile(filepath.Join(out, "tasks", task.id, "out.txt"))
		if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(task.v) {
			t.Errorf("task %s's output %q (%v), want %d", task.id, b, err, task.v)
		}
	}
	entries, err := os.ReadDir(filepath.Join(out, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("task folders %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(out, ".p2pc")); !os.IsNotExist(err) {
		t.Errorf("work folder left behind: %v", err)
	}
	return rep
}

// reusedOf lists the tasks a report says were reused, and checks that
// each kept its earlier record (before: the report that ran it) and that
// the others ran anew.
func reusedOf(t *testing.T, rep, before *report.Report) []string {
	t.Helper()
	var reused []string
	old := byID(before)
	for _, task := range rep.Tasks {
		prev, had := old[task.ID]
		switch {
		case task.Reused:
			reused = append(reused, task.ID)
			if !had || len(task.Attempts) == 0 || len(prev.Attempts) == 0 || !task.Attempts[0].Start.Equal(prev.Attempts[0].Start) {
				t.Errorf("task %s is reused but its attempts are not the earlier run's: %+v", task.ID, task.Attempts)
			}
		case had && len(prev.Attempts) > 0 && len(task.Attempts) > 0 && task.Attempts[0].Start.Equal(prev.Attempts[0].Start):
			t.Errorf("task %s is not said to be reused, but kept its earlier attempts", task.ID)
		}
	}
	if rep.Summary.Reused != len(reused) {
		t.Errorf("summary says %d reused, the tasks %d", rep.Summary.Reused, len(reused))
	}
	return reused
}

// TestEditedSpecRerunsWhatChanged: an edited spec run into the same output
// folder runs only its new and changed tasks, reuses the others (and
// says how many), and lets removed tasks go (report and folder); a job of
// another name is refused without --force.
func TestEditedSpecRerunsWhatChanged(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	run := func(step string, tasks []sweepTask, name string, extra ...string) result {
		t.Helper()
		spec := writeSpec(t, dir, "sweep.yaml", sweepSpec(name, "0", tasks))
		r := p2pc(t, append([]string{"run", spec, "--out", out, "--slots", "2"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", step, r.code, r.stderr)
		}
		return r
	}
	v1 := []sweepTask{{"a", 1}, {"b", 2}, {"c", 3}}
	run("first run", v1, "sweep")
	rep1 := checkSweep(t, out, v1)
	if got := reusedOf(t, rep1, &report.Report{}); len(got) != 0 {
		t.Fatalf("first run reused %v", got)
	}

	// One parameter edited: that task runs, the others are reused.
	v2 := []sweepTask{{"a", 1}, {"b", 20}, {"c", 3}}
	r := run("b edited", v2, "sweep")
	rep2 := checkSweep(t, out, v2)
	if got := reusedOf(t, rep2, rep1); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("b edited: reused %v, want [a c]", got)
	}
	if !strings.Contains(r.stderr, "3 of 3 tasks done (2 reused") {
		t.Errorf("the summary does not say how many were reused:\n%s", r.stderr)
	}
	if rep2.JobID == rep1.JobID {
		t.Errorf("the edited job kept the job ID %s", rep1.JobID)
	}
	// The run's report.json says it as the job database does.
	want, err := os.ReadFile(filepath.Join(out, report.FileName))
	if err != nil || !strings.Contains(string(want), `"reused": 2`) {
		t.Fatalf("report.json (%v) does not count 2 reused:\n%s", err, want)
	}
	if r := p2pc(t, "report", out, "--stdout"); r.code != 0 || r.stdout != string(want) {
		t.Fatalf("p2pc report --stdout (exit %d) differs from the run's report.json:\n%s\nwant\n%s", r.code, r.stdout, want)
	}

	// Tasks added: only they run.
	v3 := append(slices.Clone(v2), sweepTask{"d", 4}, sweepTask{"e", 5})
	run("d and e added", v3, "sweep")
	rep3 := checkSweep(t, out, v3)
	if got := reusedOf(t, rep3, rep2); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("d and e added: reused %v, want [a b c]", got)
	}

	// A task removed: it leaves the report and its folder goes; the others
	// (now at other places in the spec) are reused.
	v4 := v3[1:]
	run("a removed", v4, "sweep")
	rep4 := checkSweep(t, out, v4)
	if got := reusedOf(t, rep4, rep3); !slices.Equal(got, []string{"b", "c", "d", "e"}) {
		t.Fatalf("a removed: reused %v, want [b c d e]", got)
	}

	// Another name: another job, refused without --force, nothing changed.
	spec := writeSpec(t, dir, "sweep.yaml", sweepSpec("other", "0", v4))
	r = p2pc(t, "run", spec, "--out", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "another job") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("a job of another name: exit %d\n%s", r.code, r.stderr)
	}
	if rep := checkSweep(t, out, v4); rep.JobID != rep4.JobID {
		t.Fatalf("the refused run changed the folder's job: %s -> %s", rep4.JobID, rep.JobID)
	}
	run("another name, --force", v4, "other", "--force")
	if rep := checkSweep(t, out, v4); rep.Name != "other" {
		t.Fatalf("--force: the folder holds job %s", rep.Name)
	}
}

// TestEditedPluginRerunsAll: a change of the plugin's source (a Go
// package folder) changes every task's key: all run again.
func TestEditedPluginRerunsAll(t *testing.T) {
	parallel(t)
	// The plugin's copy lies inside this module, so that it builds with
	// the module's dependencies and nothing from the network.
	if err := os.MkdirAll(filepath.Join(repoRoot, "cmd", "p2pc", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	plug, err := os.MkdirTemp(filepath.Join(repoRoot, "cmd", "p2pc", "testdata"), "echo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(plug)
		os.Remove(filepath.Dir(plug)) // if empty
	})
	for _, f := range []string{"main.go", "echo.go", "doc.go"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "plugins", "echo", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plug, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSpec(t, dir, "echo.yaml", "name: e\nplugin: "+plug+"\ntasks:\n  - range: {param: i, from: 1, to: 3}\n")
	run := func(step string) *report.Report {
		t.Helper()
		if r := p2pc(t, "run", spec, "--out", out, "--slots", "2"); r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", step, r.code, r.stderr)
		}
		rep := readReport(t, out)
		if rep.State != report.StateComplete || rep.Summary.Done != 3 {
			t.Fatalf("%s: state %s, %d done", step, rep.State, rep.Summary.Done)
		}
		return rep
	}
	rep1 := run("first run")
	if rep := run("the same again"); len(reusedOf(t, rep, rep1)) != 3 {
		t.Fatalf("the same job again: reused %d of 3", rep.Summary.Reused)
	}
	src := filepath.Join(plug, "echo.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `Version: "1.0.0"`, `Version: "1.0.1"`, 1)
	if edited == string(b) {
		t.Fatal("echo.go has no Version 1.0.0 to edit")
	}
	if err := os.WriteFile(src, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := run("plugin edited")
	if got := reusedOf(t, rep, rep1); len(got) != 0 {
		t.Fatalf("plugin edited: reused %v, want none", got)
	}
	if rep.Plugin.Digest == rep1.Plugin.Digest || rep.Plugin.Version != "1.0.1" {
		t.Fatalf("plugin edited: digest %.12s (was %.12s), version %s", rep.Plugin.Digest, rep1.Plugin.Digest, rep.Plugin.Version)
	}
}

// TestEditAfterKill: a run SIGKILLed part way, then an edited spec run
// into its folder: the tasks done and unchanged are reused, the edited
// ones (done or not) run, and every output is the edited job's.
func TestEditAfterKill(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	var v1 []sweepTask
	for i := 1; i <= 12; i++ {
		v1 = append(v1, sweepTask{fmt.Sprintf("t%02d", i), i})
	}
	spec := writeSpec(t, dir, "sweep.yaml", sweepSpec("sweep", "0.3", v1))
	p, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--slots", "2"}, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for doneTasks(out) < 3 {
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("no tasks done in time\n%s", p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Signal(syscall.SIGKILL)
	if _, err := p.Wait(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	killed := readReport(t, out)
	var doneAtKill []string
	for _, task := range killed.Tasks {
		if task.State == report.TaskDone {
			doneAtKill = append(doneAtKill, task.ID)
		}
	}
	if len(doneAtKill) == 0 || len(doneAtKill) == len(v1) {
		t.Fatalf("done at the kill: %v", doneAtKill)
	}

	// t01 (done, most likely) and t12 (not yet) edited.
	v2 := slices.Clone(v1)
	v2[0].v, v2[11].v = 100, 1200
	writeSpec(t, dir, "sweep.yaml", sweepSpec("sweep", "0.3", v2)) // the command unchanged
	if r := p2pc(t, "run", spec, "--out", out, "--slots", "2"); r.code != 0 {
		t.Fatalf("edited rerun: exit %d\n%s", r.code, r.stderr)
	}
	rep := checkSweep(t, out, v2)
	want := slices.DeleteFunc(slices.Clone(doneAtKill), func(id string) bool { return id == "t01" || id == "t12" })
	if got := reusedOf(t, rep, killed); !slices.Equal(got, want) {
		t.Fatalf("reused %v, want the unchanged tasks done at the kill %v", got, want)
	}
}

// asSchema3 turns the job database in out into one of a p2pc that kept no
// task keys (schema 3), as an output folder made before them holds: it
// drops what every migration after version 3 added.
func asSchema3(t *testing.T, out string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(out, jobdb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`ALTER TABLE tasks DROP COLUMN key`, `ALTER TABLE tasks DROP COLUMN reused`, `ALTER TABLE attempts DROP COLUMN device`, `DROP TABLE tree`, `DELETE FROM schema_version WHERE version > 3`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestKeylessFolderRerun: an output folder of a p2pc that kept no task
// keys resumes its own job as before (and the keys are written then),
// and an edited job reuses none of its keyless tasks: they run again,
// never mistaken for the edited ones.
func TestKeylessFolderRerun(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	v1 := []sweepTask{{"a", 1}, {"b", 2}, {"c", 3}}
	v2 := []sweepTask{{"a", 1}, {"b", 20}, {"c", 3}}
	run := func(step, out string, tasks []sweepTask) *report.Report {
		t.Helper()
		spec := writeSpec(t, dir, "sweep.yaml", sweepSpec("sweep", "0", tasks))
		if r := p2pc(t, "run", spec, "--out", out, "--slots", "2"); r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", step, r.code, r.stderr)
		}
		return checkSweep(t, out, tasks)
	}

	// Edited at once: nothing of the keyless job is reused.
	out := filepath.Join(dir, "edited")
	rep1 := run("first run", out, v1)
	asSchema3(t, out)
	if got := reusedOf(t, run("b edited", out, v2), rep1); len(got) != 0 {
		t.Fatalf("an edit of a keyless job reused %v", got)
	}

	// The same job again first: resumed as before, its keys written, so
	// that the edit after it reuses what is unchanged.
	out = filepath.Join(dir, "same")
	rep1 = run("first run", out, v1)
	asSchema3(t, out)
	rep2 := run("the same job", out, v1)
	if got := reusedOf(t, rep2, rep1); len(got) != 3 {
		t.Fatalf("the same keyless job again reused %v", got)
	}
	if got := reusedOf(t, run("b edited", out, v2), rep2); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("b edited after the keys were written: reused %v, want [a c]", got)
	}
}
