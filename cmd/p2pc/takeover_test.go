package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness/bench"
	"github.com/p2pc/p2pc/internal/report"
)

// takeoverSwarm starts n members on hosts 2.. with slots each and
// detaches a job of tasks echo tasks of sleep ms each; it returns the
// members, the job's ID, its owner and the spec.
func takeoverSwarm(t *testing.T, dir string, n, slots, tasks, sleep int) (peers []*peer, id string, owner *peer, spec string) {
	t.Helper()
	for i := range n {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("t%d", i), i+2, slots, "--log-level", "debug"))
	}
	spec = writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "moving", sleep, tasks))
	id, name := detachJob(t, spec, peers)
	return peers, id, peerNamed(peers, name), spec
}

// waitDone waits until member p lists job id with at least n tasks done.
func waitDone(t *testing.T, p *peer, id string, n int64, d time.Duration) jobJSON {
	t.Helper()
	return waitJobWhere(t, p, id, fmt.Sprintf("with %d tasks done", n), d, func(j jobJSON) bool { return j.Done >= n })
}

// firstLeaseAfter is the first lease under the new owner, as p2pc bench
// --suite takeover measures it (bench.FirstLeaseAfter).
func firstLeaseAfter(rep *report.Report, at time.Time) time.Time {
	return bench.FirstLeaseAfter(rep, at)
}

// sameOutputs fails unless every task of got has the digest it has in
// want (outputs are content-addressed: the same bytes).
func sameOutputs(t *testing.T, got, want *report.Report) {
	t.Helper()
	digests := map[string]string{}
	for _, task := range want.Tasks {
		digests[task.ID] = task.Digest
	}
	if len(got.Tasks) != len(want.Tasks) {
		t.Errorf("%d tasks, a clean run has %d", len(got.Tasks), len(want.Tasks))
	}
	for _, task := range got.Tasks {
		if d, ok := digests[task.ID]; !ok || d != task.Digest || d == "" {
			t.Errorf("task %s: output digest %q, a clean run's %q", task.ID, task.Digest, d)
		}
	}
}

var tookOverRe = regexp.MustCompile(`took over a job whose owner is gone.*epoch=(\d+)`)

// TestTakeoverOwnerKilled: the owner of a detached job of 2048 tasks on
// four members is SIGKILLed halfway; its first successor takes over with
// epoch 2 within seconds, resumes from the journal it holds plus what
// the peers hand over, runs no finished task again, and the output
// fetched from another member is a clean run's.
func TestTakeoverOwnerKilled(t *testing.T) {
	dir := t.TempDir()
	const tasks = 2048
	peers, id, owner, spec := takeoverSwarm(t, dir, 4, 2, tasks, 20)
	other := notOwner(t, peers, owner.name)
	waitDone(t, other, id, tasks/2, 120*time.Second)
	owner.proc.Kill()
	killed := time.Now()
	t.Logf("owner %s SIGKILLed", owner.name)

	j := waitJobState(t, other, id, "complete", 180*time.Second)
	if j.Epoch != 2 || j.Owner == owner.name || j.Done != tasks {
		t.Errorf("after the takeover: %+v", j)
	}
	successor := peerNamed(peers, j.Owner)
	if successor == nil || !tookOverRe.MatchString(successor.proc.Stderr()) {
		t.Fatalf("no member logged the takeover (owner %q)", j.Owner)
	}
	var fetcher *peer
	for _, p := range peers {
		if p != owner && p != successor {
			fetcher = p
		}
	}
	out := filepath.Join(dir, "fetched")
	if r := p2pcEnv(t, nil, "--data", filepath.Join(dir, "newcomer"), "fetch", id[:12], "--out", out, "--no-mdns", "--join", fetcher.addr); r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	// No finished task ran again: each has exactly one accepted attempt,
	// and no peer ran one to its end twice (but for backup copies of
	// stragglers, which the coordinators log).
	checkOnce(t, rep)
	ranTwice(t, peers, rep, owner)
	first := firstLeaseAfter(rep, killed)
	if first.IsZero() {
		t.Fatalf("no attempt started after the kill")
	}
	lag := first.Sub(killed)
	t.Logf("takeover: first lease under the new owner %s %v after the kill; shares %v", j.Owner, lag.Round(time.Millisecond), sharesOf(rep))
	if lag > 5*time.Second {
		t.Errorf("first lease under the new owner %v after the kill, want within 5s", lag)
	}

	clean := filepath.Join(dir, "clean")
	if r := p2pc(t, "run", spec, "--out", clean, "--no-mdns", "--local-slots", "16"); r.code != 0 {
		t.Fatalf("clean run: exit %d\n%s", r.code, r.stderr)
	}
	sameOutputs(t, rep, readReport(t, clean))
}

// ranTwice fails if the peers' logs show a finished task run to its end
// again: a task run twice, unless its first run was on a member dead,
// which did not hand its result to anyone (the report accepted another
// peer's), or a coordinator started a backup copy of it (a straggler).
// p2pc bench --suite takeover counts with the same bench.RanAgain.
func ranTwice(t *testing.T, peers []*peer, rep *report.Report, dead ...*peer) {
	t.Helper()
	logs := map[string]string{}
	for _, p := range peers {
		logs[p.name] = p.proc.Stderr()
	}
	var names []string
	for _, d := range dead {
		names = append(names, d.name)
	}
	r := bench.RanAgain(logs, rep, names...)
	for _, e := range r.Examples {
		t.Error(e)
	}
	if r.Again > len(r.Examples) {
		t.Errorf("... %d tasks ran again in all", r.Again)
	}
	t.Logf("peers ran %d tasks to their end; %d ran again, %d results died with the dead, %d tasks had a backup copy", r.Ran, r.Again, r.Lost, r.Backups)
}

// TestTakeoverDoubleKill: the owner and its first successor die within a
// second of each other; the second successor takes the job over from the
// journal it holds, and no finished task whose holder lives runs again.
func TestTakeoverDoubleKill(t *testing.T) {
	dir := t.TempDir()
	const tasks = 512
	peers, id, owner, _ := takeoverSwarm(t, dir, 4, 2, tasks, 20)
	other := notOwner(t, peers, owner.name)
	j := waitDone(t, other, id, tasks/3, 120*time.Second)
	if len(j.Holders) < 2 {
		t.Fatalf("job held by %v, want two successors", j.Holders)
	}
	first, second := peerNamed(peers, j.Holders[0]), peerNamed(peers, j.Holders[1])
	owner.proc.Kill()
	first.proc.Kill()
	t.Logf("owner %s and first successor %s SIGKILLed; second successor %s", owner.name, first.name, second.name)
	j = waitJobState(t, second, id, "complete", 180*time.Second)
	if j.Owner != second.name || j.Epoch < 2 || j.Done != tasks {
		t.Errorf("after the double kill: %+v, want owned by %s at epoch 2 or more", j, second.name)
	}
	out := filepath.Join(dir, "fetched")
	if r := p2pc(t, "fetch", id[:12], "--out", out, "--no-mdns", "--join", second.addr); r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	ranTwice(t, peers, rep, owner, first)
}
