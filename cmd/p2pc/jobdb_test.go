package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestReportFromDatabase: `p2pc report OUT` writes the same report.json
// as the run wrote when it ended, from the job database alone.
func TestReportFromDatabase(t *testing.T) {
	parallel(t)
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
	parallel(t)
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
	before, err := os.ReadFile(filepath.Join(out, report.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if r := p2pc(t, "report", out); r.code != exitBadInput || !strings.Contains(r.stderr, "--salvage") {
		t.Fatalf("report of a damaged database: exit %d\n%s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(out, report.FileName)); !bytes.Equal(after, before) {
		t.Fatal("p2pc report of a damaged database changed report.json")
	}
	r = p2pc(t, "report", out, "--salvage")
	var salvaged report.Report
	if err := json.Unmarshal([]byte(r.stdout), &salvaged); r.code != 0 || err != nil ||
		!slices.ContainsFunc(salvaged.Warnings, func(w string) bool { return strings.Contains(w, "salvaged") }) {
		t.Fatalf("report --salvage: exit %d (%v)\n%s", r.code, err, r.stderr)
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

// taskData returns task id's inline data: from its folder (a file
// output) or from the job database.
func taskData(t *testing.T, out, id string) []byte {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(out, "tasks", id, "data")); err == nil {
		return b
	}
	ctx := context.Background()
	db, err := jobdb.OpenReadOnly(ctx, filepath.Join(out, jobdb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var data []byte
	found := false
	err = db.Outputs(ctx, func(o jobdb.Output) error {
		if o.TaskID == id {
			data, found = o.Data, true
		}
		return nil
	})
	if err != nil || !found {
		t.Fatalf("task %s has no inline output (%v)", id, err)
	}
	return data
}

// doneTasks counts the tasks the job database in out records as done
// (0 while there is none yet).
func doneTasks(out string) int {
	ctx := context.Background()
	db, err := jobdb.OpenReadOnly(ctx, filepath.Join(out, jobdb.FileName))
	if err != nil {
		return 0
	}
	defer db.Close()
	s, err := db.Status(ctx, time.Now(), time.Minute, 0)
	if err != nil {
		return 0
	}
	return s.Done
}

// TestInlineOutputsExport: inline outputs get no folder; p2pc export
// writes them as files where the folders were, or as JSON lines; a task
// with output files keeps its folder.
func TestInlineOutputsExport(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "x.yaml", `
plugin: {{repo}}/plugins/echo
tasks:
  - grid: {x: [1, 2, 3]}
`)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	if ents, _ := os.ReadDir(filepath.Join(out, "tasks")); len(ents) != 0 {
		t.Fatalf("inline outputs got folders: %v", ents)
	}
	r := p2pc(t, "export", out, "--format", "jsonl")
	if r.code != 0 {
		t.Fatalf("export jsonl: exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("jsonl has %d lines:\n%s", len(lines), r.stdout)
	}
	var first struct {
		ID     string         `json:"id"`
		Params map[string]any `json:"params"`
		Name   string         `json:"name"`
		Text   string         `json:"text"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ID != rep.Tasks[0].ID || first.Name != "data" || first.Params["x"] != 1.0 || !strings.Contains(first.Text, `"x":1`) {
		t.Fatalf("first line %s (%v)", lines[0], err)
	}
	if r := p2pc(t, "export", out); r.code != 0 {
		t.Fatalf("export files: exit %d\n%s", r.code, r.stderr)
	}
	// Every file report.json names now exists, holding the exported data.
	for _, task := range rep.Tasks {
		for _, f := range task.Files {
			b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(f)))
			if err != nil || !strings.Contains(string(b), `"x":`) {
				t.Fatalf("exported %s: %q, %v", f, b, err)
			}
		}
	}
	// A rerun reuses every task, exported folders and all.
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 || !strings.Contains(r.stderr, "3 of 3 tasks already done") {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
}

// TestStatus: p2pc status reads a running job from another process, says
// when its run died (SIGKILL), and shows the end with the failures'
// reasons; it exits 5 while the job is running or interrupted, 3 once it
// failed.
func TestStatus(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "s.yaml", `
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 150}
tasks:
  - {id: bad, params: {fail: true}}
  - range: {param: n, from: 1, to: 24}
`)
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--slots", "2"}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	status := func(code int, args ...string) jobdb.Status {
		t.Helper()
		r := p2pc(t, append([]string{"status", out, "--json"}, args...)...)
		var s jobdb.Status
		if r.code != code || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("status: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		return s
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if doneTasks(out) >= 2 {
			s := status(exitIncomplete)
			if s.State != "running" || s.Total != 25 || s.Done < 2 || s.Done+s.Failed+s.Running+s.Queued != 25 {
				t.Fatalf("status during the run: %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task done in 30s\n%s", run.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run.Kill()
	run.Wait(10 * time.Second)
	if s := status(exitIncomplete); s.State != "interrupted" || !strings.Contains(s.Error, "run died") {
		t.Fatalf("status after SIGKILL: %+v", s)
	}
	if r := p2pc(t, "run", spec, "--out", out, "--slots", "2"); r.code != exitTaskFailed {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	s := status(exitTaskFailed, "--watch") // the job is over: --watch prints once
	if s.State != "failed" || s.Done != 24 || s.Failed != 1 || len(s.Failures) == 0 || s.Failures[0].Task != "bad" || s.Failures[0].Outcome != "task_error" {
		t.Fatalf("status at the end: %+v", s)
	}
	r := p2pc(t, "status", out)
	if r.code != exitTaskFailed || !strings.Contains(r.stdout, "24/25 done, 1 failed, 0 running, 0 queued") || !strings.Contains(r.stdout, "task bad on") {
		t.Fatalf("status text:\n%s", r.stdout)
	}
}

// TestDiskFull: the disk under job.db fills up during a run (a small
// tmpfs): the run stops with an error that says so; once space is freed,
// the same command resumes and runs none of the tasks that reached the
// database again.
func TestDiskFull(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	mountTmpfs(t, out, "3m")
	spec := writeSpec(t, dir, "full.yaml", `
plugin: {{repo}}/plugins/echo
params: {output_bytes: 8000, sleep_ms: 2}
tasks:
  - range: {param: n, from: 1, to: 1000}
`) // 2 ms a task: the journal's first writes (every 50 ms) fit on the disk
	r := p2pc(t, "run", spec, "--out", out, "--slots", "2")
	if r.code != exitLocalDisk || !strings.Contains(r.stderr, "disk full") && !strings.Contains(r.stderr, "no space left on device") || !strings.Contains(r.stderr, "run the same command again") {
		t.Fatalf("run on a full disk: exit %d\n%s", r.code, r.stderr)
	}
	before := map[string]string{}
	checkSettled(t, out, before, "after the full disk")
	reached := len(before)
	if reached == 0 || reached == 1000 {
		t.Fatalf("%d tasks done before the disk filled up", reached)
	}
	t.Logf("the run on a full disk said:\n%s", lastLines(r.stderr, 3))
	if err := syscall.Mount("tmpfs", out, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	if r := p2pc(t, "run", spec, "--out", out, "--slots", "2"); r.code != 0 {
		t.Fatalf("rerun after freeing space: exit %d\n%s", r.code, r.stderr)
	}
	checkSettled(t, out, before, "after the rerun")
	if done := doneTasks(out); done != 1000 {
		t.Fatalf("%d tasks done after the rerun", done)
	}
	t.Logf("%d tasks had reached the database before the disk filled up; none ran again", reached)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestSwarmInlineExport: outputs a peer sends inline (small) or as blocks
// (large) end up exactly as a local run's: the same digests and files in
// the report, and byte-identical files after p2pc export.
func TestSwarmInlineExport(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	p := startPeer(t, dir, "p1", 2)
	spec := writeSpec(t, dir, "e.yaml", `
plugin: {{repo}}/plugins/echo
tasks:
  - grid: {output_bytes: [0, 1, 1000, 200000]}
`)
	swarm, local := filepath.Join(dir, "swarm"), filepath.Join(dir, "local")
	if r := p2pc(t, "run", spec, "--out", swarm, "--no-mdns", "--local-slots", "0", "--min-peers", "1", "--join", p.addr); r.code != 0 {
		t.Fatalf("swarm run: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "run", spec, "--out", local, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	rs, rl := readReport(t, swarm), readReport(t, local)
	for i := range rl.Tasks {
		s, l := rs.Tasks[i], rl.Tasks[i]
		if s.State != report.TaskDone || s.Digest != l.Digest || !slices.Equal(s.Files, l.Files) {
			t.Errorf("task %s: swarm %s %.12s %v, local %s %.12s %v", l.ID, s.State, s.Digest, s.Files, l.State, l.Digest, l.Files)
		}
		if !strings.Contains(s.Peer, "p1") {
			t.Errorf("task %s ran on %q, not the peer", s.ID, s.Peer)
		}
	}
	for _, out := range []string{swarm, local} {
		if r := p2pc(t, "export", out); r.code != 0 {
			t.Fatalf("export %s: exit %d\n%s", out, r.code, r.stderr)
		}
	}
	n := 0
	for _, task := range rl.Tasks {
		for _, f := range task.Files {
			a, err := os.ReadFile(filepath.Join(swarm, filepath.FromSlash(f)))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(local, filepath.FromSlash(f)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s: swarm %d bytes, local %d bytes, differ", f, len(a), len(b))
			}
			n++
		}
	}
	if n != len(rl.Tasks) {
		t.Errorf("%d files for %d tasks", n, len(rl.Tasks))
	}
}
