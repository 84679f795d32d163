package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// The end-to-end tests run the real p2pc binary, which builds and runs the
// real plugins of this repository.

var (
	p2pcBin  string // built once in TestMain
	repoRoot string
	dataDir  string // shared, so each plugin is built once
)

// TestMain runs the whole test binary inside a private network namespace
// (when one can be made), so that the tests of discovery may use mDNS:
// multicast never leaves through the machine's network card. Nothing in
// the namespace reaches the Go module proxy, so it first fetches what the
// tests' go commands need (fetchModules).
func TestMain(m *testing.M) {
	if os.Getenv(harness.NetnsEnv) != "1" && harness.NetnsAvailable() == nil {
		flag.Parse() // for selected
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		err := fetchModules(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "cmd/p2pc tests: fetch modules before entering the private network namespace, which cannot reach the module proxy: %v\n", err)
			os.Exit(1)
		}
		os.Exit(harness.MainInNetns(m))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	setParallel()
	if !harness.InPrivateNetns() {
		// Outside a private network namespace no p2pc process the tests
		// start may use mDNS (its multicast would leave through the
		// machine's network card); the mDNS tests skip.
		os.Setenv("P2PC_NO_MDNS", "true")
	}
	tmp, err := os.MkdirTemp("", "p2pc-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if _, err := harness.UseTestSwarm(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot, err = harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p2pcBin = filepath.Join(tmp, "p2pc")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := harness.Build(ctx, repoRoot, p2pcBin, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dataDir = filepath.Join(tmp, "data")
	return m.Run()
}

type result struct {
	code           int
	stdout, stderr string
}

// p2pc runs the binary with args on the tests' data folder and waits up
// to two minutes.
func p2pc(t *testing.T, args ...string) result {
	t.Helper()
	return p2pcEnv(t, nil, append([]string{"--data", dataDir}, args...)...)
}

// writeSpec writes a spec into dir, replacing {{repo}} with the repository root.
func writeSpec(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	body = strings.ReplaceAll(body, "{{repo}}", repoRoot)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readReport(t *testing.T, dir string) *report.Report {
	t.Helper()
	r, err := jobdb.ReadReport(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const mandelbrotSpec = `
name: mandel
plugin: {{repo}}/plugins/mandelbrot
params: {width: 320, height: 240, max_iter: 200, bands: %d}
tasks:
  - range: {param: band, from: 0, to: %d}
reduce: true
`

func TestMandelbrotSameImageHoweverSplit(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; plugins/mandelbrot's tests check the bands and TestSwarmStaticPeers the swarm's image in -short")
	}
	dir := t.TempDir()
	var pngs [][]byte
	for _, c := range []struct{ bands, slots int }{{1, 1}, {64, 2}, {7, 3}} {
		spec := writeSpec(t, dir, fmt.Sprintf("m%d.yaml", c.bands), fmt.Sprintf(mandelbrotSpec, c.bands, c.bands-1))
		out := filepath.Join(dir, fmt.Sprintf("out%d", c.bands))
		r := p2pc(t, "run", spec, "--out", out, "--slots", fmt.Sprint(c.slots))
		if r.code != 0 {
			t.Fatalf("run %d bands: exit %d\n%s", c.bands, r.code, r.stderr)
		}
		png, err := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
		if err != nil {
			t.Fatal(err)
		}
		pngs = append(pngs, png)
		rep := readReport(t, out)
		if rep.State != report.StateComplete || rep.Summary.Done != c.bands || len(rep.Tasks) != c.bands {
			t.Fatalf("report: state %s, %d/%d done, %d tasks", rep.State, rep.Summary.Done, rep.Summary.Total, len(rep.Tasks))
		}
		for _, task := range rep.Tasks {
			if task.Peer == "" || len(task.Digest) != 64 || len(task.Attempts) != 1 || task.Attempts[0].Outcome != report.OutcomeOK {
				t.Fatalf("task %s: %+v", task.ID, task)
			}
		}
		if len(rep.Outputs) != 1 || rep.Outputs[0] != "mandelbrot.png" || len(rep.JobID) != 64 {
			t.Fatalf("report outputs %v, job id %q", rep.Outputs, rep.JobID)
		}
	}
	if !bytes.Equal(pngs[0], pngs[1]) || !bytes.Equal(pngs[0], pngs[2]) {
		t.Fatalf("PNG differs with the band split: %d, %d, %d bytes", len(pngs[0]), len(pngs[1]), len(pngs[2]))
	}
}

func TestRunJSONAndResume(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "echo.yaml", `
plugin: {{repo}}/plugins/echo
params: {greeting: hi}
tasks:
  - grid: {x: [1, 2, 3], y: [a, b]}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output is not a report: %v\n%s", err, r.stdout)
	}
	if rep.Summary.Done != 6 {
		t.Fatalf("done %d, want 6", rep.Summary.Done)
	}
	// The run's reads after its writer closed leave no SQLite side files.
	for _, f := range []string{"job.db-wal", "job.db-shm"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s left in the output folder after the run", f)
		}
	}
	data := taskData(t, out, rep.Tasks[5].ID)
	var params map[string]any
	if err := json.Unmarshal(data, &params); err != nil || params["x"] != 3.0 || params["y"] != "b" || params["greeting"] != "hi" {
		t.Fatalf("echo output %s (%v)", data, err)
	}
	// The same job again: every task is reused, none runs.
	r = p2pc(t, "run", spec, "--out", out, "--json")
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	var rep2 report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep2); err != nil {
		t.Fatal(err)
	}
	if rep2.JobID != rep.JobID || rep2.Tasks[0].Attempts[0].Start != rep.Tasks[0].Attempts[0].Start {
		t.Fatalf("rerun did not reuse the done tasks")
	}
}

// TestResumeFromReportOnly: an output folder of a p2pc that kept no job
// database (report.json and task folders only) is resumed too: its done
// tasks are reused, and the new job database holds their records.
func TestResumeFromReportOnly(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "echo.yaml", `
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: i, from: 1, to: 4}
`)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Task folders instead of inline outputs, and no database: as an
	// older p2pc left its output folder.
	if r := p2pc(t, "export", out); r.code != 0 {
		t.Fatalf("export: exit %d\n%s", r.code, r.stderr)
	}
	before := readReport(t, out)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(out, jobdb.FileName+suffix))
	}
	if r := p2pc(t, "run", spec, "--out", out); r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	after := readReport(t, out) // from the new job database
	if after.Summary.Done != 4 || len(after.Tasks) != 4 {
		t.Fatalf("after the rerun: %d done, %d tasks", after.Summary.Done, len(after.Tasks))
	}
	for i, task := range after.Tasks {
		if len(task.Attempts) != 1 || !task.Attempts[0].Start.Equal(before.Tasks[i].Attempts[0].Start) {
			t.Errorf("task %s ran again: attempts %+v", task.ID, task.Attempts)
		}
	}
}

func TestBadInput(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	junk := filepath.Join(dir, "junk.sh")
	os.WriteFile(junk, []byte("#!/bin/sh\necho hello\nsleep 30\n"), 0o755)

	tests := []struct {
		name, spec string
		args       []string
		code       int
		want       string // in stderr
	}{
		{"malformed yaml", "tasks: [\n  - {id: a\n", nil, exitBadInput, "bad.yaml:"},
		{"unknown key", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a}]\ncolour: red\n", nil, exitBadInput, `bad.yaml:3:1`},
		{"wrong type", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a}]\nretries: many\n", nil, exitBadInput, "bad.yaml:3:10"},
		{"empty tasks", "plugin: {{repo}}/plugins/echo\ntasks: []\n", nil, exitBadInput, "bad.yaml:2:"},
		{"missing plugin", "plugin: ./nope\ntasks: [{id: a}]\n", nil, exitBadInput, `bad.yaml:1:9: plugin "./nope"`},
		{"not a plugin", "plugin: /bin/true\ntasks: [{id: a}]\n", nil, exitBadInput, "bad.yaml:1:9: plugin"},
		{"junk plugin", "plugin: " + junk + "\ntasks: [{id: a}]\n", nil, exitBadInput, "bad.yaml:1:9: plugin"},
		{"unwritable out", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a}]\n", []string{"--out", filepath.Join(notDir, "sub")}, exitBadInput, "output folder"},
		{"missing spec", "", []string{"--out", dir}, exitBadInput, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.yaml")
			if tt.spec != "" {
				path = writeSpec(t, filepath.Dir(path), "bad.yaml", tt.spec)
			}
			args := append([]string{"run", path}, tt.args...)
			if tt.args == nil {
				args = append(args, "--out", filepath.Join(t.TempDir(), "out"))
			}
			start := time.Now()
			r := p2pc(t, args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, want %d; stderr should contain %q:\n%s", r.code, tt.code, tt.want, r.stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s to fail", d)
			}
		})
	}
}

func TestOutputFolderOfAnotherJob(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	a := writeSpec(t, dir, "a.yaml", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a, params: {v: 1}}]\n")
	b := writeSpec(t, dir, "b.yaml", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a, params: {v: 2}}]\n")
	if r := p2pc(t, "run", a, "--out", out); r.code != 0 {
		t.Fatalf("job a: exit %d\n%s", r.code, r.stderr)
	}
	before := taskData(t, out, "a")
	r := p2pc(t, "run", b, "--out", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "another job") {
		t.Fatalf("job b into a's folder: exit %d\n%s", r.code, r.stderr)
	}
	after := taskData(t, out, "a")
	if !bytes.Equal(before, after) || !strings.Contains(string(after), `"v":1`) {
		t.Fatalf("job a's output changed: %s -> %s", before, after)
	}
	if r := p2pc(t, "run", b, "--out", out, "--force"); r.code != 0 {
		t.Fatalf("--force: exit %d\n%s", r.code, r.stderr)
	}
}

func TestFailingTasks(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "f.yaml", `
plugin: {{repo}}/plugins/echo
retries: 1
timeout: 1s
reduce: false
tasks:
  - {id: ok}
  - {id: flaky, params: {crash_attempts: 1}}
  - {id: crash, params: {crash: true}}
  - {id: fail, params: {fail: true}}
  - {id: slow, params: {sleep_ms: 60000}}
`)
	out := filepath.Join(dir, "out")
	start := time.Now()
	r := p2pc(t, "run", spec, "--out", out, "--slots", "3")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s: the timeout did not kill the slow task", d)
	}
	rep := readReport(t, out)
	want := map[string]struct {
		state    string
		outcomes string
	}{
		"ok":    {report.TaskDone, "ok"},
		"flaky": {report.TaskDone, "crashed,ok"},
		"crash": {report.TaskFailed, "crashed,crashed"},
		"fail":  {report.TaskFailed, "task_error,task_error"},
		"slow":  {report.TaskFailed, "timeout,timeout"},
	}
	for _, task := range rep.Tasks {
		var outcomes []string
		for _, a := range task.Attempts {
			outcomes = append(outcomes, a.Outcome)
		}
		w := want[task.ID]
		if task.State != w.state || strings.Join(outcomes, ",") != w.outcomes {
			t.Errorf("task %s: state %s, outcomes %v; want %s, %s", task.ID, task.State, outcomes, w.state, w.outcomes)
		}
	}
	if rep.State != report.StateFailed || rep.Summary.Failed != 3 {
		t.Errorf("report state %s, failed %d", rep.State, rep.Summary.Failed)
	}
	if _, err := os.Stat(filepath.Join(out, "tasks", "crash")); !os.IsNotExist(err) {
		t.Errorf("a failed task left an output folder: %v", err)
	}
}

func TestInterruptAndResume(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	n := 40
	if testing.Short() {
		n = 20 // the resumed run's part is the slow one
	}
	spec := writeSpec(t, dir, "slow.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 300}
tasks:
  - range: {param: n, from: 1, to: %d}
`, n))
	out := filepath.Join(dir, "out")
	p, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--slots", "2"}, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until some tasks are done, then Ctrl-C.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if doneTasks(out) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("no tasks done in time\n%s", p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	plugins := childPids(p.Pid())
	p.Signal(syscall.SIGINT)
	code, err := p.Wait(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT, want %d\n%s", code, exitInterrupted, p.Stderr())
	}
	for _, pid := range plugins {
		if alive(pid) {
			t.Errorf("plugin process %d survived the interrupt", pid)
		}
	}
	rep := readReport(t, out)
	if rep.State != report.StateInterrupted || rep.Summary.Done == 0 || rep.Summary.Done == n {
		t.Fatalf("report after interrupt: state %s, done %d", rep.State, rep.Summary.Done)
	}
	if _, err := os.Stat(filepath.Join(out, ".p2pc")); !os.IsNotExist(err) {
		t.Errorf("work folder left behind: %v", err)
	}
	done := rep.Summary.Done
	r := p2pc(t, "run", spec, "--out", out, "--slots", "2")
	if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("resuming: %d of %d", done, n)) {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	rep = readReport(t, out)
	if rep.State != report.StateComplete || rep.Summary.Done != n {
		t.Fatalf("after resume: state %s, done %d", rep.State, rep.Summary.Done)
	}
}

func TestValidate(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	good := writeSpec(t, dir, "good.yaml", "plugin: {{repo}}/plugins/echo\ntasks:\n  - range: {param: i, from: 1, to: 10}\n")
	bad := writeSpec(t, dir, "bad.yaml", "plugin: {{repo}}/plugins/echo\ntasks:\n  - range: {param: i, from: 1, to: 10, step: 0}\n")
	r := p2pc(t, "validate", good)
	if r.code != 0 || !regexp.MustCompile(`ok: job "good", 10 tasks`).MatchString(r.stdout) {
		t.Fatalf("validate good: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = p2pc(t, "validate", good, bad)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "bad.yaml:3:") {
		t.Fatalf("validate bad: exit %d\n%s", r.code, r.stderr)
	}
	noPlugin := writeSpec(t, dir, "noplugin.yaml", "name: x\nplugin: ./nope\ntasks: [{id: a}]\n")
	r = p2pc(t, "validate", noPlugin)
	if r.code != exitBadInput || !strings.Contains(r.stderr, `noplugin.yaml:2:9: plugin "./nope"`) {
		t.Fatalf("validate, missing plugin: exit %d\n%s", r.code, r.stderr)
	}
}

// childPids lists the processes whose parent is pid.
func childPids(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscan(e.Name(), &child); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		var ppid int
		if len(fields) > 1 {
			fmt.Sscan(fields[1], &ppid)
		}
		if ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
