package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/sandbox"
)

var confinedRe = regexp.MustCompile(`tasks confined: (.*) allow-network=`)

// TestPeersShowConfinement: `p2pc join` prints how it confines tasks, and
// `p2pc peers` (table and JSON) shows the same for that peer, carried in
// its gossiped metadata. A peer run as root runs tasks as another user.
func TestPeersShowConfinement(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	pr := startPeer(t, dir, "c1", 1)
	waitStderr(t, pr.proc, confinedRe)
	confined := confinedRe.FindStringSubmatch(pr.proc.Stderr())[1]
	if os.Geteuid() == 0 && (!strings.Contains(confined, " user=") || strings.Contains(confined, "user=own:")) {
		t.Errorf("a root peer runs tasks as itself: %q", confined)
	}
	r := p2pc(t, "peers", "--no-mdns", "--join", pr.addr, "--wait", "1s", "--json")
	if r.code != 0 {
		t.Fatalf("p2pc peers: exit %d\n%s", r.code, r.stderr)
	}
	var members []struct{ Name, Sandbox string }
	if err := json.Unmarshal([]byte(r.stdout), &members); err != nil {
		t.Fatalf("p2pc peers --json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, m := range members {
		if m.Name == "c1" {
			found = true
			if m.Sandbox != confined {
				t.Errorf("p2pc peers says c1 confines tasks with %q, c1 says %q", m.Sandbox, confined)
			}
		}
	}
	if !found {
		t.Fatalf("p2pc peers does not list c1:\n%s", r.stdout)
	}
	r = p2pc(t, "peers", "--no-mdns", "--join", pr.addr, "--wait", "1s")
	if !strings.Contains(r.stdout, "TASKS CONFINED") || !strings.Contains(r.stdout, confined) {
		t.Errorf("p2pc peers table lacks c1's confinement %q:\n%s", confined, r.stdout)
	}
}

// TestJobCannotTouchAnotherJobsInput is the probe's 6-of-8 case through
// two real jobs on one peer: while a victim job is enrolled there (its
// input staged, its leases held back until a second peer comes), an
// attacker job's tasks (exec plugin) read and rewrite the victim's input
// at its real path on the peer. Both are refused for want of permission,
// and every victim task, run after the attack, computes from the honest
// input. (That the attack works without confinement is shown by
// TestHostileRewriteOtherJobInput in internal/pluginhost.)
func TestJobCannotTouchAnotherJobsInput(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	shared := startPeer(t, dir, "shared", 2)
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("honest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var victimTasks strings.Builder
	for i := range 8 {
		fmt.Fprintf(&victimTasks, "  - id: v%d\n    params: {command: [\"cat secret.txt\"], shell: true}\n", i)
	}
	victim := writeSpec(t, dir, "victim.yaml", "name: victim\nplugin: {{repo}}/plugins/exec\ninputs: [secret.txt]\nretries: 0\ntimeout: 1m\ntasks:\n"+victimTasks.String())
	vout := filepath.Join(dir, "vout")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", victim, "--out", vout, "--no-mdns", "--local-slots", "0",
		"--min-peers", "2", "--join", shared.addr, "--no-progress"}, harness.Options{Name: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Stop(5 * time.Second) })

	// The victim's input as the peer holds it (package node).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var target string
	for target == "" {
		if m, _ := filepath.Glob(filepath.Join(shared.data, "work", "*", "*", "job", "inputs", "secret.txt")); len(m) > 0 {
			target = m[0]
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the victim's input never appeared on the peer\n%s", run.Stderr())
		case <-tick.C:
		}
	}
	attack := writeSpec(t, dir, "attack.yaml", fmt.Sprintf(`name: attacker
plugin: {{repo}}/plugins/exec
retries: 0
timeout: 1m
tasks:
  - id: read
    params: {command: ["cat %[1]s"], shell: true}
  - id: write
    params: {command: ["echo evil > %[1]s"], shell: true}
`, target))
	aout := filepath.Join(dir, "aout")
	r := p2pc(t, "run", attack, "--out", aout, "--no-mdns", "--local-slots", "0", "--join", shared.addr, "--no-progress")
	if r.code == 0 {
		t.Fatalf("the attacker's tasks succeeded:\n%s", r.stderr)
	}
	for _, task := range readReport(t, aout).Tasks {
		var errs []string
		for _, a := range task.Attempts {
			errs = append(errs, a.Error)
		}
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, " "), "Permission denied") {
			t.Errorf("attacker task %s (%s) was not refused for want of permission: %q", task.ID, task.State, errs)
		}
	}

	// The second peer lets the victim's leases go: its tasks run now.
	startPeer(t, dir, "second", 2, "--join", shared.addr)
	if code, err := run.Wait(time.Minute); err != nil || code != 0 {
		t.Fatalf("victim job: exit %d %v\n%s", code, err, run.Stderr())
	}
	rep := readReport(t, vout)
	if r := p2pc(t, "export", vout); r.code != 0 { // inline outputs as files
		t.Fatalf("export: exit %d\n%s", r.code, r.stderr)
	}
	onShared := 0
	for _, task := range rep.Tasks {
		if task.Peer == "shared" {
			onShared++
		}
		for _, f := range task.Files {
			b, err := os.ReadFile(filepath.Join(vout, f))
			if err != nil || strings.Contains(string(b), "evil") {
				t.Errorf("victim task %s output %s: %q %v", task.ID, f, b, err)
			}
		}
		if task.Digest != rep.Tasks[0].Digest {
			t.Errorf("victim task %s computed %.12s, task %s %.12s: the input changed under it", task.ID, task.Digest, rep.Tasks[0].ID, rep.Tasks[0].Digest)
		}
	}
	if onShared == 0 {
		t.Errorf("no victim task ran on the attacked peer: %v", sharesOf(rep))
	}
}

// TestReduceArtifactsAreTheSubmitters: p2pc run as root runs the reduce
// step as the task user, yet the artifacts it places in the output folder
// are the submitter's (this process's uid and gid), without a set-user-ID
// bit, and a hard link the step made to one of them is placed as a copy.
func TestReduceArtifactsAreTheSubmitters(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: tasks run as another user only then")
	}
	dir := t.TempDir()
	spec := writeSpec(t, dir, "own.yaml", `
name: own
plugin: {{repo}}/plugins/exec
params:
  command: [echo, hi]
  reduce:
    command: ["id -u > uid; chmod 4755 uid; ln uid link"]
    shell: true
    outputs: [uid, link]
reduce: true
tasks:
  - range: {param: n, from: 1, to: 2}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	uid, err := os.ReadFile(filepath.Join(out, "uid"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(uid)) == "0" {
		t.Fatalf("the reduce step ran as root: this test checks nothing")
	}
	for _, name := range []string{"uid", "link"} {
		fi, err := os.Lstat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s is owned by %d:%d, want the submitter's %d:%d", name, st.Uid, st.Gid, os.Geteuid(), os.Getegid())
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || st.Nlink != 1 {
			t.Errorf("%s: mode %v, %d links; want no set-user-ID bit and one link", name, fi.Mode(), st.Nlink)
		}
	}
}

// TestRootOnlyInputNamed: a root submitter whose input only root may read
// (mode 0600, in a folder of mode 0700) says so once, naming the file,
// and its local tasks (run as the task user) still read it.
func TestRootOnlyInputNamed(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("only a root submitter runs local tasks as another user")
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "private", "secret.txt")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, dir, "secret.yaml", `
plugin: {{repo}}/plugins/exec
inputs: [private/secret.txt]
params: {command: ["cat secret.txt"], shell: true}
retries: 0
tasks:
  - range: {param: n, from: 0, to: 3}
`)
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	re := regexp.MustCompile(`secret.txt\\?": the task user \S+ cannot read ` + regexp.QuoteMeta(secret) + ` by its permissions`)
	if n := len(re.FindAllString(r.stderr, -1)); n != 1 {
		t.Fatalf("the root-only input is named %d times, want once:\n%s", n, r.stderr)
	}
}

// TestForkBombWithoutCgroups: a peer that makes no cgroups (here:
// P2PC_NO_CGROUPS=1) says which limits its tasks get instead, on its
// start line and in p2pc peers, and a task's fork bomb stops at its
// process cap (RLIMIT_NPROC: sandbox.DefaultPids more than the task user
// ran) instead of running them all.
func TestForkBombWithoutCgroups(t *testing.T) {
	dir := t.TempDir()
	p, addr, _ := startJoin(t, dir, "nocg", []string{sandbox.NoCgroupsEnv + "=1"})
	waitStderr(t, p, confinedRe)
	confined := confinedRe.FindStringSubmatch(p.Stderr())[1]
	if !strings.Contains(confined, "cgroup=none (switched off by P2PC_NO_CGROUPS=1) limits=rlimit(nproc,as,fsize)") {
		t.Fatalf("the peer does not say that rlimits stand in for cgroups: %q", confined)
	}
	if r := p2pc(t, "peers", "--no-mdns", "--join", addr, "--wait", "1s"); !strings.Contains(r.stdout, "limits=rlimit(nproc,as,fsize)") {
		t.Errorf("p2pc peers does not say which limits the peer's tasks get:\n%s", r.stdout)
	}
	spec := writeSpec(t, dir, "bomb.yaml", `
plugin: {{repo}}/plugins/exec
params:
  command: ['n=0; while [ $n -lt 800 ]; do sleep 5 </dev/null >/dev/null 2>&1 & n=$((n+1)); echo "started $n" >&2; done']
  shell: true
retries: 0
tasks:
  - range: {param: n, from: 0, to: 0}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addr)
	if r.code != exitTaskFailed {
		t.Fatalf("fork bomb on a peer without cgroups: exit %d, want %d (stopped at the process cap)\n%s", r.code, exitTaskFailed, r.stderr)
	}
	if !strings.Contains(strings.ToLower(r.stderr), "fork") {
		t.Errorf("the failed task does not say that a fork failed:\n%s", r.stderr)
	}
}
