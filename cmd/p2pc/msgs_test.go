package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// The tests of this file check what p2pc tells its user: every failure
// with its reason, no silent wait, progress that tells done from failed.

// A verified task whose replicas disagree fails loudly: the summary line
// says failed (never "ok") and why, naming the digests and who voted for
// each; report.json has the same reason in the task's error.
func TestNoQuorumSaysWhy(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "qa", 1), startPeer(t, dir, "qb", 1)}
	// Every run prints another number: the replicas never agree. Both
	// peers listen on 127.0.0.1, one host: distinct_hosts: false lets
	// replicas share it (a single-machine lab).
	spec := writeSpec(t, dir, "nd.yaml", `
name: nd
plugin: {{repo}}/plugins/exec
params:
  command: ["echo $$ $(date +%N) > out.txt"]
  shell: true
  outputs: [out.txt]
verify: {replicas: 2, distinct_hosts: false}
tasks:
  - range: {param: n, from: 1, to: 2}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers))
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	line := regexp.MustCompile(`task 000[01] failed after 2 attempts: no quorum \(2 matching votes and a majority needed, 2 votes\): digest [0-9a-f]{12} from q[ab]; digest [0-9a-f]{12} from q[ab]\n`)
	if n := len(line.FindAllString(r.stderr, -1)); n != 2 {
		t.Errorf("the summary names the votes of %d tasks, want 2:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr, ": ok after") {
		t.Errorf("a failed task is summed up as ok:\n%s", r.stderr)
	}
	rep := readReport(t, out)
	for _, task := range rep.Tasks {
		if task.State != report.TaskFailed || !strings.Contains(task.Error, "no quorum") ||
			!strings.Contains(task.Error, "from qa") || !strings.Contains(task.Error, "from qb") {
			t.Errorf("task %s: state %s, error %q; want failed with the votes", task.ID, task.State, task.Error)
		}
		for _, v := range task.Votes {
			if !strings.Contains(task.Error, fmt.Sprintf("digest %.12s from %s", v.Digest, v.Peer)) {
				t.Errorf("task %s: error %q does not name %s's vote %.12s", task.ID, task.Error, v.Peer, v.Digest)
			}
		}
	}
}

// A failure keeps its reason: the summary names the attempt, its peer and
// outcome, the exit status, and the last lines of stderr, unescaped; a
// panic shows its message and where it happened, not a whole stack per
// task, which report.json and `p2pc logs` keep.
func TestFailuresKeepTheirReason(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "nf.yaml", `
name: notfound
plugin: {{repo}}/plugins/exec
retries: 0
params:
  command: ["echo starting >&2; nosuchprogram --flag"]
  shell: true
tasks:
  - {id: nf}
`)
	out := filepath.Join(dir, "nf")
	r := p2pc(t, "run", spec, "--out", out, "--local-slots", "1")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	want := regexp.MustCompile(`task nf failed after 1 attempt; attempt 1 on \S+: task_error: exec: sh exited with status 127\n {6}starting\n {6}\S*sh: 1: nosuchprogram: not found\n`)
	if !want.MatchString(r.stderr) {
		t.Errorf("the summary does not say %q:\n%s", want, r.stderr)
	}

	spec = writeSpec(t, dir, "panic.yaml", `
name: boom
plugin: {{repo}}/plugins/echo
retries: 1
tasks:
  - {id: "1"}
  - {id: "2"}
params: {panic: true}
`)
	out = filepath.Join(dir, "panic")
	r = p2pcPanics(t, "run", spec, "--out", out, "--local-slots", "2")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	want = regexp.MustCompile(`task 1 failed after 2 attempts; attempt 2 on \S+: task_error: panic: echo: panicking as asked\n {6}main\.\(\*echo\)\.Run\n {10}\S+/plugins/echo/echo\.go:\d+\n`)
	if !want.MatchString(r.stderr) {
		t.Errorf("the summary does not say %q:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, `\n`) || len(r.stderr) > 2048 {
		t.Errorf("stderr holds a stack or escaped lines, or is long (%d bytes):\n%s", len(r.stderr), r.stderr)
	}
	rep := readReport(t, out)
	if last := rep.Tasks[0].Attempts[1].Error; !strings.Contains(last, "goroutine ") || !strings.Contains(last, "runtime/debug.Stack") {
		t.Errorf("report.json lost the stack: %q", last)
	}
	r = p2pcPanics(t, "logs", out, "1")
	if r.code != 0 || len(regexp.MustCompile(`goroutine \d+ \[running\]`).FindAllString(r.stdout, -1)) != 2 || !strings.Contains(r.stdout, "attempt 2 on ") ||
		!strings.Contains(r.stdout, "why: panic: echo: panicking as asked (attempt 2, below)") {
		t.Errorf("p2pc logs: exit %d, want both attempts' stacks\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = p2pc(t, "logs", out, "nosuch"); r.code != exitBadInput || !strings.Contains(r.stderr, `no task "nosuch"; its tasks: 1, 2`) {
		t.Errorf("p2pc logs of an unknown task: exit %d\n%s", r.code, r.stderr)
	}
}

// p2pcPanics is p2pc for a run whose output names a plugin's panic (p2pc
// checks the output for its own).
func p2pcPanics(t *testing.T, args ...string) result {
	t.Helper()
	return p2pcIn(t, "", args...)
}

// No silent wait: a peers-only run that can never find a peer is refused
// at once; one whose peers do not answer says which and why at the
// default log level, and fails after --wait-peers (default 1m).
func TestSilentWaitsSpeak(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 1))
	out := filepath.Join(dir, "out")

	start := time.Now()
	r := p2pc(t, "run", spec, "--out", out, "--local-slots", "0", "--no-mdns")
	if r.code != exitBadInput || !strings.Contains(r.stderr, "no peer can ever be found") {
		t.Errorf("--local-slots 0 --no-mdns and no --join: exit %d, want %d, saying why\n%s", r.code, exitBadInput, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to refuse", d)
	}

	start = time.Now()
	r = p2pc(t, "run", spec, "--out", out, "--local-slots", "0", "--no-mdns", "--join", "127.0.0.1:1", "--wait-peers", "3s")
	took := time.Since(start)
	if r.code != exitTaskFailed {
		t.Fatalf("nothing listens at --join: exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	for _, want := range []string{
		`waiting for peers: no answer; asking again every 1s.*peer 127.0.0.1:1: nothing listens there \(connection refused\)`,
		`gave up after waiting 3s for a peer that can take the work \(--wait-peers\)`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "rpc error") {
		t.Errorf("gRPC words in the messages:\n%s", r.stderr)
	}
	if took > 20*time.Second {
		t.Errorf("took %s to give up after --wait-peers 3s", took)
	}

	if harness.InPrivateNetns() { // a name lookup may leave the machine otherwise
		r = p2pc(t, "run", spec, "--out", out, "--local-slots", "0", "--no-mdns", "--join", "nosuchhost.invalid:7070", "--wait-peers", "2s")
		if r.code != exitTaskFailed || !strings.Contains(r.stderr, "peer nosuchhost.invalid:7070: the name nosuchhost.invalid does not resolve") {
			t.Errorf("a --join name that does not resolve: exit %d, want %d, saying so\n%s", r.code, exitTaskFailed, r.stderr)
		}
	} else {
		t.Log("no private network namespace: a --join name that does not resolve is not tried")
	}
	if r = p2pc(t, "run", "--help"); !regexp.MustCompile(`--wait-peers=DURATION\s[^-]*\(default\s+1m\)`).MatchString(r.stdout) {
		t.Errorf("--wait-peers has no default of 1m:\n%s", r.stdout)
	}
}

// Progress tells done, failed, running and queued tasks apart. Where the
// terminal cannot show a bar (zero columns, TERM=dumb, not a tty) it
// prints plain lines, never carriage returns; on a real terminal it draws
// the bar.
func TestProgressCounts(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "mix.yaml", `
name: mix
plugin: {{repo}}/plugins/echo
retries: 0
tasks:
  - {id: a, params: {fail: true}}
  - {id: b}
  - {id: c, params: {sleep_ms: 300}}
`)
	final := regexp.MustCompile(`(?m)^mix: 2 of 3 done, 1 failed, 0 running, 0 queued$`)
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "pipe"), "--local-slots", "1")
	if r.code != exitTaskFailed || !final.MatchString(r.stderr) || strings.Contains(r.stderr, "\r") {
		t.Errorf("not a tty: exit %d; want a plain line %q, no carriage return:\n%q", r.code, final, r.stderr)
	}
	for _, c := range []struct {
		name string
		cols int
		term string
		bar  bool
	}{
		{"zero width", 0, "xterm", false},
		{"dumb", 100, "dumb", false},
		{"a terminal", 100, "xterm", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runOnPty(t, c.cols, c.term, "run", spec, "--out", filepath.Join(t.TempDir(), "out"), "--local-slots", "1")
			if code != exitTaskFailed {
				t.Fatalf("exit %d, want %d\n%q", code, exitTaskFailed, out)
			}
			if c.bar {
				if !strings.Contains(out, "\r") || !strings.Contains(out, "2 of 3 done, 1 failed") {
					t.Errorf("no bar with the counts on a %d-column terminal:\n%q", c.cols, out)
				}
				return
			}
			if strings.Contains(out, "\r\r") || strings.Contains(strings.ReplaceAll(out, "\r\n", "\n"), "\r") || !final.MatchString(strings.ReplaceAll(out, "\r\n", "\n")) {
				t.Errorf("want plain lines ending %q, no bare carriage return:\n%q", final, out)
			}
		})
	}
}

// runOnPty runs p2pc with its stderr (and stdout) on a new pseudo
// terminal of cols columns and TERM=term, and returns what it printed.
func runOnPty(t *testing.T, cols int, term string, args ...string) (string, int) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo terminals: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p2pcBin, append([]string{"--data", dataDir}, args...)...)
	cmd.Env = append(os.Environ(), "TERM="+term)
	cmd.Stdout, cmd.Stderr = pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { // until the last holder of the terminal closes it (EIO)
		defer close(read)
		io.Copy(&out, ptm)
	}()
	err = cmd.Wait()
	<-read
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	return out.String(), code
}

// The smaller messages: validate without a spec says what it wants; the
// help spells --join=ADDR,...; peers --json uses report.json's snake_case;
// the submitter is its hostname with and without a swarm; Ctrl-C on a
// swarm run is no peer's fault and logs no warning.
func TestSmallerMessages(t *testing.T) {
	parallel(t)
	if r := p2pc(t, "validate"); r.code != exitBadInput || !strings.Contains(r.stderr, "Give one or more job specs") {
		t.Errorf("validate without a spec: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "run", "--help"); !strings.Contains(r.stdout, "--join=ADDR,... ") || strings.Contains(r.stdout, ",...,...") {
		t.Errorf("run --help does not spell --join=ADDR,...:\n%s", r.stdout)
	}

	dir := t.TempDir()
	pj := startPeer(t, dir, "pj", 2)
	r := p2pc(t, "peers", "--no-mdns", "--join", pj.addr, "--json", "--wait", "500ms")
	var members []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &members); err != nil || r.code != 0 {
		t.Fatalf("peers --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	found := false
	for _, m := range members {
		if m["name"] == "pj" {
			found = true
			if m["grpc_addr"] != pj.addr || m["free_slots"] == nil || m["peer_id"] == "" || m["GRPCAddr"] != nil {
				t.Errorf("peers --json: %v, want snake_case keys (grpc_addr %s)", m, pj.addr)
			}
		}
	}
	if !found {
		t.Errorf("peers --json does not list pj:\n%s", r.stdout)
	}

	host, _ := os.Hostname()
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 1))
	for _, args := range [][]string{{"--no-mdns"}, {"--no-mdns", "--join", pj.addr}} {
		out := filepath.Join(t.TempDir(), "out")
		if r := p2pc(t, append([]string{"run", spec, "--out", out, "--local-slots", "1"}, args...)...); r.code != 0 {
			t.Fatalf("run %v: exit %d\n%s", args, r.code, r.stderr)
		}
		if rep := readReport(t, out); rep.Node != host {
			t.Errorf("run %v: the submitter is named %q, want the hostname %q", args, rep.Node, host)
		}
	}

	// Ctrl-C while the peer runs tasks.
	slow := writeSpec(t, dir, "slow.yaml", `
name: slow
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 20000}
tasks:
  - range: {param: n, from: 1, to: 4}
`)
	out := filepath.Join(dir, "slow")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", slow, "--out", out, "--no-mdns", "--local-slots", "0",
		"--min-peers", "1", "--join", pj.addr}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The rows of tasks not tried are written beside the run, and a
		// running task's row once it ran for a second (the journal holds
		// short ones back).
		if rep, err := jobdb.ReadReport(context.Background(), out); err == nil && len(rep.Tasks) > 0 && rep.Tasks[0].State == report.TaskRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task ran on the peer\n%s", run.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run.Signal(syscall.SIGINT)
	if code, err := run.Wait(30 * time.Second); err != nil || code != exitInterrupted {
		t.Fatalf("interrupted: exit %d, %v\n%s", code, err, run.Stderr())
	}
	for _, bad := range []string{"peer lost", "interrupt signal received", "rpc error", "level=WARN"} {
		if strings.Contains(run.Stderr(), bad) {
			t.Errorf("Ctrl-C: stderr says %q:\n%s", bad, run.Stderr())
		}
	}
	for _, task := range readReport(t, out).Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeLost {
				t.Errorf("task %s: Ctrl-C counted as a lost attempt: %+v", task.ID, a)
			}
		}
	}
}
