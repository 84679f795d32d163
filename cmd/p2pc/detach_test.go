package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/testwait"
)

var detachedRe = regexp.MustCompile(`(?m)^job ([0-9a-f]{64}) owner (\S+)$`)

// detachJob runs `p2pc run SPEC --detach` against the members ps and
// returns the job ID and its owner's name.
func detachJob(t *testing.T, spec string, ps []*peer) (id, owner string) {
	t.Helper()
	r := p2pc(t, "run", spec, "--detach", "--no-mdns", "--join", addrs(ps))
	m := detachedRe.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("run --detach: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return m[1], m[2]
}

// swarmJobs is `p2pc jobs --json` asked of member p.
func swarmJobs(t *testing.T, p *peer) []jobJSON {
	t.Helper()
	r := p2pc(t, "jobs", "--json", "--no-mdns", "--join", p.addr)
	if r.code != 0 {
		t.Fatalf("jobs: exit %d\n%s", r.code, r.stderr)
	}
	var out []jobJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("jobs --json: %v\n%s", err, r.stdout)
	}
	return out
}

// waitJobState waits until member p lists job id in state want.
func waitJobState(t *testing.T, p *peer, id, want string, d time.Duration) jobJSON {
	t.Helper()
	return waitJobWhere(t, p, id, want, d, func(j jobJSON) bool { return j.State == want })
}

// waitJobWhere waits until member p lists job id as ok wants (what says
// what for).
func waitJobWhere(t *testing.T, p *peer, id, what string, d time.Duration, ok func(jobJSON) bool) jobJSON {
	t.Helper()
	var got jobJSON
	testwait.For(t, d, fmt.Sprintf("job %s %s as %s lists it", id[:12], what, p.name), func() bool {
		for _, j := range swarmJobs(t, p) {
			if j.ID == id {
				got = j
				return ok(j)
			}
		}
		return false
	})
	return got
}

func peerNamed(ps []*peer, name string) *peer {
	for _, p := range ps {
		if p.name == name {
			return p
		}
	}
	return nil
}

// notOwner is a member of ps other than the one named owner.
func notOwner(t *testing.T, ps []*peer, owner string) *peer {
	t.Helper()
	for _, p := range ps {
		if p.name != owner {
			return p
		}
	}
	t.Fatalf("no member but the owner %s", owner)
	return nil
}

// TestDetachCompletesInSwarm: the submitter hands the job over and exits;
// the swarm runs it; another member lists it complete; fetch writes an
// output folder whose image is the local run's, byte for byte.
func TestDetachCompletesInSwarm(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	var peers []*peer
	for i := range 3 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("d%d", i), i+2, 2))
	}
	spec := writeSpec(t, dir, "m.yaml", fmt.Sprintf(mandelbrotSpec, 16, 15))
	id, owner := detachJob(t, spec, peers)
	if peerNamed(peers, owner) == nil {
		t.Fatalf("owner %q is none of the members", owner)
	}
	other := notOwner(t, peers, owner)
	j := waitJobState(t, other, id, "complete", 90*time.Second)
	if j.Done != 16 || j.Total != 16 || j.Owner != owner || j.Epoch != 1 || len(j.Holders) == 0 {
		t.Errorf("jobs --json: %+v", j)
	}
	if len(j.ResultsOn) < 2 {
		t.Errorf("the output folder is on %v, want at least two members", j.ResultsOn)
	}
	if r := p2pc(t, "jobs", "--no-mdns", "--join", other.addr); r.code != 0 || !regexp.MustCompile(id[:12]+`\s+mandel\s+complete\s+16/16\s+`+owner).MatchString(r.stdout) {
		t.Errorf("jobs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A machine that never took part (a fresh data folder: another node
	// identity of the same swarm) fetches the results.
	out := filepath.Join(dir, "fetched")
	if r := p2pcEnv(t, nil, "--data", filepath.Join(dir, "newcomer"), "fetch", id[:8], "--out", out, "--no-mdns", "--join", other.addr); r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	t.Logf("owner %s, shares %v", owner, sharesOf(rep))
	if rep.JobID != id {
		t.Errorf("fetched report: job %s, want %s", rep.JobID, id)
	}
	local := filepath.Join(dir, "local")
	if r := p2pc(t, "run", spec, "--out", local, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(local, "mandelbrot.png"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("fetched PNG (%d bytes) differs from the local run's (%d bytes)", len(a), len(b))
	}
	for _, task := range rep.Tasks {
		if !bytes.Equal(taskData(t, out, task.ID), taskData(t, local, task.ID)) {
			t.Errorf("task %s: fetched output differs from the local run's", task.ID)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, ".fetched.tmp-*")); len(matches) > 0 {
		t.Errorf("temporary folders left: %v", matches)
	}
	// A second fetch into the same, now full, folder is refused, and so
	// is a fetch onto a file, which stays.
	if r := p2pc(t, "fetch", id[:8], "--out", out, "--no-mdns", "--join", other.addr); r.code == 0 || !strings.Contains(r.stderr, "not empty") {
		t.Errorf("fetch into a full folder: exit %d\n%s", r.code, r.stderr)
	}
	if r := p2pc(t, "fetch", id[:8], "--out", spec, "--no-mdns", "--join", other.addr); r.code == 0 || !strings.Contains(r.stderr, "not a folder") {
		t.Errorf("fetch onto a file: exit %d\n%s", r.code, r.stderr)
	}
	if fi, err := os.Stat(spec); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the file a fetch was refused onto: %v", err)
	}
}

const slowEcho = `
name: %s
plugin: {{repo}}/plugins/echo
params: {sleep_ms: %d}
tasks:
  - range: {param: i, from: 1, to: %d}
`

// TestAttachFollowsToEnd: attach shows the job's progress until it ends,
// then writes its output folder.
func TestAttachFollowsToEnd(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "a0", 2, 1), startPeerOnHost(t, dir, "a1", 3, 1)}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "slow", 300, 12))
	id, owner := detachJob(t, spec, peers)
	out := filepath.Join(dir, "attached")
	r := p2pc(t, "attach", id[:10], "--out", out, "--no-mdns", "--join", notOwner(t, peers, owner).addr)
	if r.code != 0 {
		t.Fatalf("attach: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "slow: 12 of 12 done, 0 failed, 0 running, 0 queued") {
		t.Errorf("attach did not show the progress to the end:\n%s", r.stderr)
	}
	if !regexp.MustCompile(`slow: [0-9] of 12 done`).MatchString(r.stderr) {
		t.Errorf("attach showed no progress before the end:\n%s", r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	if len(rep.Tasks) != 12 {
		t.Errorf("attached output folder: %d tasks, want 12", len(rep.Tasks))
	}
}

// TestCancelBySubmitterOnly: another node identity may not cancel a job;
// its submitter may. A job still running cannot be fetched.
func TestCancelBySubmitterOnly(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "c0", 2, 1), startPeerOnHost(t, dir, "c1", 3, 1)}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "long", 1000, 200))
	id, _ := detachJob(t, spec, peers)
	join := []string{"--no-mdns", "--join", peers[0].addr}

	r := p2pc(t, append([]string{"fetch", id[:12], "--out", filepath.Join(dir, "early")}, join...)...)
	if r.code != exitIncomplete || !strings.Contains(r.stderr, "is still running") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("fetch of a running job: exit %d, want %d and one line\n%s", r.code, exitIncomplete, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "early")); err == nil {
		t.Errorf("a refused fetch made its folder")
	}

	stranger := filepath.Join(dir, "stranger")
	r = p2pcEnv(t, nil, append([]string{"--data", stranger, "cancel", id[:12]}, join...)...)
	if r.code != exitDenied || !strings.Contains(r.stderr, "only the submitter") {
		t.Errorf("cancel by another node: exit %d, want %d\n%s", r.code, exitDenied, r.stderr)
	}
	if j := waitJobState(t, peers[1], id, "running", 30*time.Second); j.State != "running" {
		t.Errorf("after a refused cancel: %+v", j)
	}

	r = p2pc(t, append([]string{"cancel", id[:12]}, join...)...)
	if r.code != 0 || !strings.Contains(r.stderr, "canceled") {
		t.Fatalf("cancel by the submitter: exit %d\n%s", r.code, r.stderr)
	}
	j := waitJobState(t, peers[1], id, "canceled", 30*time.Second)
	if j.Done >= 200 {
		t.Errorf("canceled job did all its tasks: %+v", j)
	}
	r = p2pc(t, append([]string{"cancel", id[:12]}, join...)...)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "has ended already (canceled)") {
		t.Errorf("cancel of a canceled job: exit %d, want %d\n%s", r.code, exitBadInput, r.stderr)
	}
}

// TestJobPrefixErrors: an unknown and an ambiguous job prefix are one-line
// errors with exit code 6; a member started with --no-own owns no job.
func TestJobPrefixErrors(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "x0", 2, 1), startPeerOnHost(t, dir, "x1", 3, 1, "--no-own"), startPeerOnHost(t, dir, "x2", 4, 1)}
	join := []string{"--no-mdns", "--join", peers[1].addr}

	// Jobs until two IDs share their first digit (at most 17: there are
	// 16 digits).
	first := map[byte]string{}
	ambiguous := ""
	for i := 0; ambiguous == "" && i < 17; i++ {
		spec := writeSpec(t, dir, fmt.Sprintf("j%d.yaml", i), fmt.Sprintf(slowEcho, fmt.Sprintf("j%d", i), 1, 1))
		id, owner := detachJob(t, spec, peers)
		if owner == "x1" {
			t.Fatalf("job %s owned by x1, started with --no-own", id[:12])
		}
		if _, ok := first[id[0]]; ok {
			ambiguous = id[:1]
		}
		first[id[0]] = id
	}
	r := p2pc(t, append([]string{"fetch", ambiguous, "--out", filepath.Join(dir, "amb")}, join...)...)
	if r.code != exitNoJob || !strings.Contains(r.stderr, "ambiguous") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("ambiguous prefix %q: exit %d, want %d and one line\n%s", ambiguous, r.code, exitNoJob, r.stderr)
	}
	unknown := ""
	for _, c := range "0123456789abcdef" {
		if _, ok := first[byte(c)]; !ok {
			unknown = string(c) + "0"
			break
		}
	}
	if unknown == "" {
		unknown = "g"
	}
	for _, cmd := range [][]string{{"attach", unknown}, {"cancel", unknown}, {"fetch", unknown, "--out", filepath.Join(dir, "unk")}} {
		r := p2pc(t, append(cmd, join...)...)
		if r.code != exitNoJob || !strings.Contains(r.stderr, "no job of the swarm has an ID starting with") {
			t.Errorf("%s of unknown prefix %q: exit %d, want %d\n%s", cmd[0], unknown, r.code, exitNoJob, r.stderr)
		}
	}
}

// TestOwnerRestartResumes: an owner stopped while its job runs resumes
// the job when it starts again, and the job completes with every task
// accepted once.
func TestOwnerRestartResumes(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	hosts := map[string]int{"r0": 2, "r1": 3, "r2": 4}
	var peers []*peer
	for _, name := range []string{"r0", "r1", "r2"} {
		peers = append(peers, startPeerOnHost(t, dir, name, hosts[name], 1))
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "resumed", 300, 30))
	id, owner := detachJob(t, spec, peers)
	other := notOwner(t, peers, owner)
	testwait.For(t, 60*time.Second, "some tasks done", func() bool {
		for _, j := range swarmJobs(t, other) {
			if j.ID == id && j.Done > 0 && j.State == "running" {
				return true
			}
		}
		return false
	})
	peerNamed(peers, owner).proc.Stop(20 * time.Second)
	restarted := startPeerOnHost(t, dir, owner, hosts[owner], 1, "--join", other.addr)
	j := waitJobState(t, other, id, "complete", 120*time.Second)
	if j.Owner != owner || j.Done != 30 {
		t.Errorf("after the owner's restart: %+v", j)
	}
	out := filepath.Join(dir, "fetched")
	if r := p2pc(t, "fetch", id[:12], "--out", out, "--no-mdns", "--join", restarted.addr); r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	checkOnce(t, readReport(t, out))
}
