package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// joinTree is the folder of a p2pc join's cgroup tree in a v1
// controller's hierarchy (mounted at /sys/fs/cgroup/CTRL), or skips.
func joinTree(t *testing.T, p *harness.Proc, ctrl string) string {
	t.Helper()
	waitStderr(t, p, confinedRe) // printed after the address a test waits for
	if !strings.Contains(p.Stderr(), "cgroup=v1(") {
		t.Skipf("no cgroup v1 tree for tasks here:\n%s", p.Stderr())
	}
	own := ""
	for l := range strings.SplitSeq(readFile(t, fmt.Sprintf("/proc/%d/cgroup", p.Pid())), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == ctrl {
			own = f[2]
		}
	}
	m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctrl, own, fmt.Sprintf("p2pc-%d-*", p.Pid())))
	if len(m) != 1 {
		t.Fatalf("cgroup tree of pid %d in %s: %v", p.Pid(), ctrl, m)
	}
	return m[0]
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestJoinCPUsAndMemory: --cpus and --memory, given in a --config file,
// cap the peer's tasks: the tree's CPU quota and memory limit are set,
// and CPU-bound tasks are throttled to the quota.
func TestJoinCPUsAndMemory(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "join.yaml")
	if err := os.WriteFile(cfg, []byte("cpus: 0.25\nmemory: 512MiB\ndisk: 1GiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, addr, _ := startJoin(t, dir, "capped", nil, "--config", cfg)
	waitStderr(t, j, regexp.MustCompile(`tasks confined: .* cpus=0\.25 memory=512 MiB disk=1 GiB priority=idle`))
	cpu := joinTree(t, j, "cpu")
	if q, p := readInt(t, filepath.Join(cpu, "cpu.cfs_quota_us")), readInt(t, filepath.Join(cpu, "cpu.cfs_period_us")); q*4 != p {
		t.Errorf("CPU quota %d per %d us, want a quarter", q, p)
	}
	if got := readInt(t, filepath.Join(joinTree(t, j, "memory"), "memory.limit_in_bytes")); got != 512<<20 {
		t.Errorf("memory limit %d, want 512 MiB", got)
	}
	spec := writeSpec(t, dir, "spin.yaml", `
plugin: {{repo}}/plugins/exec
params:
  command: ["i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"]
  shell: true
tasks:
  - range: {param: n, from: 0, to: 1}
`)
	t0 := time.Now()
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", addr)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	throttled := regexp.MustCompile(`nr_throttled (\d+)`).FindStringSubmatch(readFile(t, filepath.Join(cpu, "cpu.stat")))
	if throttled == nil || throttled[1] == "0" {
		t.Errorf("tasks never throttled under --cpus 0.25 (job took %v): %v", time.Since(t0), throttled)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJoinPauseWhenBusy: while a load this test starts keeps the
// machine busy, the peer freezes its tasks; once the load stops it
// thaws them and the job completes.
func TestJoinPauseWhenBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of busy CPU; -short")
	}
	if busy := machineBusy(t, 2*time.Second); busy > 50 {
		t.Skipf("the machine is already %.0f%% busy: cannot tell a load of ours from it", busy)
	}
	dir := t.TempDir()
	j, addr, _ := startJoin(t, dir, "pausing", nil, "--pause-when-busy", "85", "--slots", "1")
	tree := joinTree(t, j, "freezer")
	// The plugin processes' cgroups, each frozen and thawed on its own.
	states := func() string {
		m, _ := filepath.Glob(filepath.Join(tree, "*", "freezer.state"))
		var out []string
		for _, f := range m {
			out = append(out, strings.TrimSpace(readFile(t, f)))
		}
		return strings.Join(out, ",")
	}
	spec := writeSpec(t, dir, "slow.yaml", `
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 500}
tasks:
  - range: {param: n, from: 0, to: 15}
`) // 8 s on one slot: still running when the pause comes (a job's pool ends with it)
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", addr}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Kill() })
	waitStderr(t, j, regexp.MustCompile(`job session started`))

	// The load: one busy shell per CPU, outside p2pc.
	var load []*exec.Cmd
	stopLoad := func() {
		for _, c := range load {
			c.Process.Kill()
			c.Wait()
		}
		load = nil
	}
	t.Cleanup(stopLoad)
	for range max(2, runtime.NumCPU()) {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		load = append(load, c)
	}
	t0 := time.Now()
	waitStderr(t, j, regexp.MustCompile(`tasks paused`))
	t.Logf("paused %v after the load started", time.Since(t0))
	if s := states(); s == "" || strings.Contains(s, "THAWED") {
		t.Errorf("paused, but the plugin cgroups are %q", s)
	}
	stopLoad()
	t0 = time.Now()
	waitStderr(t, j, regexp.MustCompile(`tasks resumed`))
	t.Logf("resumed %v after the load stopped", time.Since(t0))
	code, err := run.Wait(time.Minute)
	if err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s", code, err, run.Stderr())
	}
	if s := states(); strings.Contains(s, "FROZEN") {
		t.Errorf("after the job the plugin cgroups are %q", s)
	}
}

// machineBusy is the machine's CPU use over d, in percent.
func machineBusy(t *testing.T, d time.Duration) float64 {
	t.Helper()
	sample := func() (total, busy int64) {
		f := strings.Fields(strings.SplitN(readFile(t, "/proc/stat"), "\n", 2)[0])
		for i, x := range f[1:min(len(f), 9)] {
			v, _ := strconv.ParseInt(x, 10, 64)
			total += v
			if i != 3 && i != 4 {
				busy += v
			}
		}
		return total, busy
	}
	t0, b0 := sample()
	time.Sleep(d) // a measurement over d, not a wait for a condition
	t1, b1 := sample()
	if t1 == t0 {
		return 0
	}
	return 100 * float64(b1-b0) / float64(t1-t0)
}

// TestJobTooBigIsRefused: a peer whose --memory is less than a task
// needs, or whose --disk (its block store's cap) is less than the job's
// plugin and inputs take, refuses the job, and the run fails saying why
// instead of waiting.
func TestJobTooBigIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name, flag, size, resources, want string
	}{
		{"memory", "--memory", "1GiB", "resources: {memory: 2GiB}\n",
			"a task needs 2 GiB of memory (resources.memory), this peer gives its tasks 1 GiB (--memory)"},
		{"disk", "--disk", "1MiB", "", // the echo plugin alone is larger
			"this peer's block store holds at most 1 MiB (--disk)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, addr, _ := startJoin(t, dir, "small", nil, tt.flag, tt.size)
			spec := writeSpec(t, dir, "big.yaml", "plugin: {{repo}}/plugins/echo\n"+tt.resources+"tasks:\n  - range: {param: n, from: 0, to: 1}\n")
			r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "6s")
			if r.code != exitTaskFailed {
				t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("the run does not say why (%q):\n%s", tt.want, r.stderr)
			}
		})
	}
}

// TestTaskOverMemoryLimit: a task that uses more than its job's
// resources.memory is killed and reported as such, not as a crash.
func TestTaskOverMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	j, addr, _ := startJoin(t, dir, "limited", nil)
	joinTree(t, j, "memory") // skips without cgroups
	spec := writeSpec(t, dir, "hog.yaml", `
plugin: {{repo}}/plugins/exec
params:
  command: ["head -c 400000000 /dev/zero | sort >/dev/null"] # sort holds the one line
  shell: true
resources: {memory: 64MiB}
retries: 0
tasks:
  - range: {param: n, from: 0, to: 0}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addr)
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	t.Logf("summary:\n%s", r.stderr)
	if !strings.Contains(r.stderr, "exceeded memory limit 64 MiB") {
		t.Errorf("the summary does not name the memory limit:\n%s", r.stderr)
	}
	rep := readReport(t, out)
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == "crashed" || !strings.Contains(a.Error, "exceeded memory limit 64 MiB") {
				t.Errorf("attempt: outcome %s, error %q; want exceeded memory limit 64 MiB, not a crash", a.Outcome, a.Error)
			}
		}
	}
}

// TestTaskOverDiskLimit: a task that writes more than its share of the
// peer's --disk is stopped and reported "exceeded disk limit". (The
// block store, capped at --disk too, holds the exec plugin.)
func TestTaskOverDiskLimit(t *testing.T) {
	dir := t.TempDir()
	_, addr, _ := startJoin(t, dir, "tight", nil, "--disk", "64MiB", "--slots", "32") // 2 MiB per task
	spec := writeSpec(t, dir, "fill.yaml", `
plugin: {{repo}}/plugins/exec
params:
  command: ["head -c 10000000 /dev/zero > big"]
  shell: true
retries: 0
tasks:
  - range: {param: n, from: 0, to: 0}
`)
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", addr)
	if r.code != exitTaskFailed || !strings.Contains(r.stderr, "exceeded disk limit 2 MiB") {
		t.Fatalf("exit %d, want %d and exceeded disk limit 2 MiB\n%s", r.code, exitTaskFailed, r.stderr)
	}
}

// TestJoinConfigFileStrict: a --config key that names no flag is an
// error, not ignored.
func TestJoinConfigFileStrict(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "join.yaml")
	if err := os.WriteFile(cfg, []byte("cpus: 1\npause_when_bussy: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := p2pc(t, "join", "--config", cfg, "--no-mdns")
	if r.code != exitBadInput || !strings.Contains(r.stderr, "unknown keys pause-when-bussy") {
		t.Fatalf("exit %d, want %d and the unknown key named\n%s", r.code, exitBadInput, r.stderr)
	}
}

// TestPausedPastTimeout: a task frozen by --pause-when-busy is not failed
// as timed out for its frozen time; frozen until near the coordinator's
// backstop (timeout + peerpb.LeaseGrace), its lease is given back as
// canceled (no failed attempt, no strike), and the task runs again once
// the peer resumes. The machine is made to look busy through
// P2PC_TEST_BUSY_FILE, not by loading it.
func TestPausedPastTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s: the pause and the resume take 3 s each, the lease runs to its backstop; -short")
	}
	dir := t.TempDir()
	busy := filepath.Join(dir, "busy")
	setBusy := func(pct string) {
		if err := os.WriteFile(busy, []byte(pct), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setBusy("0")
	j, addr, _ := startJoin(t, dir, "pausing", []string{"P2PC_TEST_BUSY_FILE=" + busy}, "--pause-when-busy", "50", "--slots", "1")
	// A pause freezes the tasks' cgroups: a peer without the freezer (an
	// ordinary user with no cgroup delegated) cannot pause them.
	confined := regexp.MustCompile(`tasks confined: .*cgroup=(\S+)`)
	waitStderr(t, j, confined)
	if cg := confined.FindStringSubmatch(j.Stderr())[1]; !strings.Contains(cg, "freezer") {
		t.Skipf("the peer has no cgroup freezer to pause tasks with: %s", regexp.MustCompile(`tasks confined: .*`).FindString(j.Stderr()))
	}
	// 4 s of work, a 5 s timeout and no retries: a timeout, or any failed
	// attempt, fails the job.
	spec := writeSpec(t, dir, "slow.yaml", `
name: slow
plugin: {{repo}}/plugins/exec
params: {command: [sleep, "4"]}
timeout: 5s
retries: 0
tasks:
  - range: {param: n, from: 0, to: 0}
`)
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--no-progress", "--local-slots", "0", "--join", addr}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Kill() })
	waitStderr(t, j, regexp.MustCompile(`job session started`))
	setBusy("100") // paused 3 s on: the task's 4 s are not over
	waitStderr(t, j, regexp.MustCompile(`tasks paused`))
	waitStderr(t, j, regexp.MustCompile(`lease given back: paused until near its end`))
	setBusy("0")
	code, err := run.Wait(time.Minute)
	if err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s", code, err, run.Stderr())
	}
	rep := readReport(t, out)
	atts := rep.Tasks[0].Attempts
	if n := len(atts); n < 2 || atts[n-1].Outcome != report.OutcomeOK {
		t.Fatalf("attempts %+v, want the last ok after one given back", atts)
	}
	for _, a := range atts[:len(atts)-1] {
		if a.Outcome != report.OutcomeCanceled || !strings.Contains(a.Error, "paused on this peer") {
			t.Errorf("attempt %+v: want canceled for the pause", a)
		}
	}
}

// TestJoinKeepResultsChecked: keep-results from a --config file is read
// as a duration and checked.
func TestJoinKeepResultsChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ value, want string }{
		{"-5m", "--keep-results: must be at least 0"},
		{"forever", "keep-results"},
	} {
		cfg := filepath.Join(dir, "join.yaml")
		if err := os.WriteFile(cfg, []byte("keep-results: "+c.value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := p2pc(t, "join", "--config", cfg, "--no-mdns", "--listen", "127.0.0.1:0")
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("keep-results: %s: exit %d, want an error naming %q\n%s", c.value, r.code, c.want, r.stderr)
		}
	}
}

// TestSparseOutputOverDiskLimit: a sparse output counts at its length
// (apparent size), not at the blocks it takes, on a peer (a 1 GiB
// sparse file where its tasks may hold 2 MiB) and on the submitter's own
// slots (a 5 GiB one, over sandbox.DefaultFileSize): the task fails with
// "exceeded disk limit" and nothing of it is kept.
func TestSparseOutputOverDiskLimit(t *testing.T) {
	dir := t.TempDir()
	_, addr, _ := startJoin(t, dir, "tight", nil, "--disk", "64MiB", "--slots", "32") // 2 MiB per task
	for _, c := range []struct {
		name, size, want string
		args             []string
	}{
		{"peer", "1G", "exceeded disk limit 2 MiB", []string{"--local-slots", "0", "--join", addr}},
		{"local", "5G", "exceeded disk limit 4 GiB", []string{"--local-slots", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := writeSpec(t, dir, c.name+".yaml", `
plugin: {{repo}}/plugins/exec
params:
  command: ["truncate -s `+c.size+` big"]
  shell: true
  outputs: [big]
retries: 0
tasks:
  - range: {param: n, from: 0, to: 0}
`)
			out := filepath.Join(dir, c.name)
			r := p2pc(t, append([]string{"run", spec, "--out", out, "--no-mdns"}, c.args...)...)
			if r.code != exitTaskFailed || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, want %d and %s\n%s", r.code, exitTaskFailed, c.want, r.stderr)
			}
		})
	}
}
