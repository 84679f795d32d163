package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// p2pcIn is p2pc run in the working folder dir ("": this process's),
// without the check of its output for panics.
func p2pcIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	p, err := harness.Start(p2pcBin, append([]string{"--data", dataDir}, args...), harness.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return result{code, p.Stdout(), p.Stderr()}
}

// inlineJob runs a job of n tasks whose outputs are inline (kept in
// job.db), the last of them failing, and returns its output folder.
func inlineJob(t *testing.T, dir string, n int) string {
	t.Helper()
	spec := writeSpec(t, dir, "inline.yaml", `
plugin: {{repo}}/plugins/echo
retries: 0
params: {output_bytes: 4000}
tasks:
  - range: {param: n, from: 1, to: `+fmt.Sprint(n-1)+`}
  - {id: bad, params: {fail: true}}
`)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--slots", "2", "--no-progress"); r.code != exitTaskFailed {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	return out
}

// TestExportToStdout: --to - is stdout for --format jsonl, and refused
// for --format files (which writes a folder), with nothing written.
func TestExportToStdout(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := inlineJob(t, dir, 4)
	cwd := t.TempDir()
	r := p2pcIn(t, cwd, "export", out, "--format", "jsonl", "--to", "-")
	if lines := strings.Count(r.stdout, "\n"); r.code != 0 || lines != 3 || !strings.Contains(r.stderr, "exported 3 inline outputs to stdout") {
		t.Fatalf("export --to -: exit %d, %d lines\n%s", r.code, lines, r.stderr)
	}
	r = p2pcIn(t, cwd, "export", out, "--to", "-")
	if r.code != exitBadInput || !strings.Contains(r.stderr, "--to -: --format files writes a folder") {
		t.Fatalf("export --format files --to -: exit %d\n%s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Fatalf("export wrote into its working folder: %v", ents)
	}
}

// TestExportDiskFull: p2pc export onto a disk too small for all (a small
// tmpfs) exits 4, saying so, and leaves no partial file: the JSON lines
// file is not there at all, each exported file that is there is whole,
// and no temporary file is left.
func TestExportDiskFull(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs") // before the job
	}
	dir := t.TempDir()
	out := inlineJob(t, dir, 60) // 59 outputs of 4000 bytes
	small := filepath.Join(dir, "small")
	mountTmpfs(t, small, "100k")

	whole := p2pc(t, "export", out, "--format", "jsonl")
	if whole.code != 0 {
		t.Fatalf("export: exit %d\n%s", whole.code, whole.stderr)
	}
	want := map[string]string{} // task ID -> its data
	sc := bufio.NewScanner(strings.NewReader(whole.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l exportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %s: %v", sc.Text(), err)
		}
		want[l.ID] = string(l.Base64)
		if l.Text != nil {
			want[l.ID] = *l.Text
		}
	}

	jsonl := filepath.Join(small, "x.jsonl")
	r := p2pc(t, "export", out, "--format", "jsonl", "--to", jsonl)
	if r.code != exitLocalDisk || !strings.Contains(r.stderr, "write "+jsonl+": no space left on device") {
		t.Fatalf("export jsonl to a full disk: exit %d, want %d\n%s", r.code, exitLocalDisk, r.stderr)
	}
	if _, err := os.Stat(jsonl); !os.IsNotExist(err) {
		t.Errorf("a partial %s was left: %v", jsonl, err)
	}

	r = p2pc(t, "export", out, "--to", small)
	if r.code != exitLocalDisk || !strings.Contains(r.stderr, "no space left on device") {
		t.Fatalf("export files to a full disk: exit %d, want %d\n%s", r.code, exitLocalDisk, r.stderr)
	}
	files := 0
	err := filepath.WalkDir(small, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", path)
			return nil
		}
		rel, _ := filepath.Rel(small, path)
		id := strings.Split(rel, string(filepath.Separator))[1]
		if b, _ := os.ReadFile(path); string(b) != want[id] {
			t.Errorf("%s: %d bytes, want %d", rel, len(b), len(want[id]))
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 || files == len(want) {
		t.Fatalf("%d of %d files exported to a disk too small for all", files, len(want))
	}
	t.Logf("%d of %d files fitted; the export said: %s", files, len(want), lastLines(r.stderr, 1))
}

// mountTmpfs makes the folder dir and mounts a tmpfs of size there, till
// the test ends; the test skips where none can be mounted.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// TestReportSaysWhatItDid: p2pc report says where it wrote the report,
// with the job's state and counts.
func TestReportSaysWhatItDid(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := inlineJob(t, dir, 3)
	r := p2pc(t, "report", out)
	want := "wrote " + filepath.Join(out, report.FileName) + ": job inline ("
	if r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, ") failed: 2 of 3 tasks done, 1 failed") {
		t.Fatalf("report: exit %d, want %q in\n%s", r.code, want, r.stderr)
	}
	r = p2pc(t, "report", out, "--stdout")
	if r.code != 0 || !strings.Contains(r.stderr, "printed the report on stdout: job inline (") || !json.Valid([]byte(r.stdout)) {
		t.Fatalf("report --stdout: exit %d\n%s", r.code, r.stderr)
	}
}

// TestLogsWithoutTask: p2pc logs OUT without a task says what to give
// and lists the job's task IDs, failed ones first.
func TestLogsWithoutTask(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := inlineJob(t, dir, 13)
	r := p2pc(t, "logs", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "which task? Give its ID after the output folder: p2pc logs OUT TASK") ||
		!strings.Contains(r.stderr, "has tasks 0000, 0001, 0002") || !strings.Contains(r.stderr, "(13 in all); failed: bad") {
		t.Fatalf("logs OUT: exit %d\n%s", r.code, r.stderr)
	}
	r = p2pc(t, "logs", filepath.Join(dir, "nowhere"))
	if r.code != exitBadInput || !strings.Contains(r.stderr, "holds no job") {
		t.Fatalf("logs NOWHERE: exit %d\n%s", r.code, r.stderr)
	}
}

// TestStatusExitCode: p2pc status exits 0 for a complete job and 3 for
// a failed one (TestStatus: 5 for one running or interrupted).
func TestStatusExitCode(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	out := inlineJob(t, dir, 2)
	if r := p2pc(t, "status", out); r.code != exitTaskFailed || !strings.Contains(r.stdout, " failed") {
		t.Fatalf("status of a failed job: exit %d, want %d\n%s%s", r.code, exitTaskFailed, r.stdout, r.stderr)
	}
	spec := writeSpec(t, dir, "ok.yaml", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a}]\n")
	ok := filepath.Join(dir, "ok")
	if r := p2pc(t, "run", spec, "--out", ok, "--no-mdns", "--no-progress"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "status", ok, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"state":"complete"`) {
		t.Fatalf("status of a complete job: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
