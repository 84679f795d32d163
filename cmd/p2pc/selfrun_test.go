package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/internal/testwait"
)

var (
	attachedRe = regexp.MustCompile(`job [0-9a-f]{12} \(selfrun\) is running in the swarm \(owner \S+, epoch \d+, \d+ of \d+ tasks done\): attaching to it instead of starting over`)
	fetchedRe  = regexp.MustCompile(`job [0-9a-f]{12} \(selfrun\) finished in the swarm \(complete, owner \S+, epoch \d+\): fetching its output folder instead of running it again`)
)

// jobNamed waits until member p lists a job named name and returns it.
func jobNamed(t *testing.T, p *peer, name string, d time.Duration) jobJSON {
	t.Helper()
	var got jobJSON
	testwait.For(t, d, fmt.Sprintf("a job named %s as %s lists it", name, p.name), func() bool {
		for _, j := range swarmJobs(t, p) {
			if j.Name == name {
				got = j
				return true
			}
		}
		return false
	})
	return got
}

// TestPlainRunSurvivesItsDeath: a plain `p2pc run` of 2048 tasks on four
// members copies its journal to two of them as it runs; SIGKILLed at
// about half, a holder takes the job over and finishes it with no human
// action. The same command run again attaches to the job (or fetches it
// when it ended), and run again on a copy of the dead run's output folder
// once the job ended, fetches it. Both output folders hold a clean run's
// outputs (their SHA-256 digests); no task is accepted twice, no
// finished task runs again.
func TestPlainRunSurvivesItsDeath(t *testing.T) {
	dir := t.TempDir()
	const tasks = 2048
	var peers []*peer
	for i := range 4 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("r%d", i), i+2, 2, "--log-level", "debug"))
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "selfrun", 20, tasks))
	out := filepath.Join(dir, "out")
	args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress", "--log-level", "debug"}
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Kill() })
	testwait.For(t, 120*time.Second, "half the tasks done in the run's job database", func() bool {
		select {
		case <-run.Done():
			t.Fatalf("the run ended before it was killed\n%s", run.Stderr())
		default:
		}
		return doneTasks(out) >= tasks/2
	})
	j := jobNamed(t, peers[0], "selfrun", 10*time.Second)
	if j.Epoch != 1 || !strings.Contains(j.Owner, "-run-") || len(j.Holders) != 2 {
		t.Fatalf("the run's job as a member lists it: %+v; want owned by the run's node at epoch 1, held by two members", j)
	}
	id := j.ID
	run.Kill()
	killed := time.Now()
	if _, err := run.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("run SIGKILLed with %d tasks done in its job database; holders %v", doneTasks(out), j.Holders)
	// A copy of the dead run's output folder, run again once the job
	// ended: it fetches.
	later := filepath.Join(dir, "later")
	if err := os.CopyFS(later, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}

	// The same command again, at once: the job is the swarm's now.
	r := p2pc(t, args[2:]...)
	if r.code != 0 {
		t.Fatalf("run again: exit %d\n%s", r.code, r.stderr)
	}
	switch {
	case attachedRe.MatchString(r.stderr):
		t.Logf("run again: attached (%v after the kill)", time.Since(killed).Round(time.Millisecond))
	case fetchedRe.MatchString(r.stderr):
		t.Logf("run again: the job had ended, fetched")
	default:
		t.Fatalf("run again: it neither attached nor fetched\n%s", r.stderr)
	}
	j = waitJobState(t, peers[0], id, "complete", 30*time.Second)
	if j.Epoch < 2 || strings.Contains(j.Owner, "-run-") || j.Done != tasks {
		t.Errorf("after the kill: %+v, want taken over by a member at epoch 2 or more", j)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	ranTwice(t, peers, rep)
	if first := firstLeaseAfter(rep, killed); !first.IsZero() {
		t.Logf("first lease under the new owner %s: %v after the kill", j.Owner, first.Sub(killed).Round(time.Millisecond))
	}

	r = p2pc(t, "--data", dataDir, "run", spec, "--out", later, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress")
	if r.code != 0 || !fetchedRe.MatchString(r.stderr) {
		t.Fatalf("run again on the dead run's folder once the job ended: exit %d, want a fetch\n%s", r.code, r.stderr)
	}

	clean := filepath.Join(dir, "clean")
	if r := p2pc(t, "run", spec, "--out", clean, "--no-mdns", "--local-slots", "16"); r.code != 0 {
		t.Fatalf("clean run: exit %d\n%s", r.code, r.stderr)
	}
	want := readReport(t, clean)
	sameOutputs(t, rep, want)
	sameOutputs(t, readReport(t, later), want)
}

// TestPlainRunEndTold: a plain run whose journal the members hold tells
// them when it ends; they forget the job (none takes it over when the
// run's node leaves), and the run's output folder is its own.
func TestPlainRunEndTold(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	var peers []*peer
	for i := range 3 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("e%d", i), i+2, 2, "--log-level", "info"))
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(slowEcho, "told", 50, 64))
	out := filepath.Join(dir, "out")
	// --replicate-after 0: a job this short is placed at once.
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress", "--log-level", "debug", "--replicate-after", "0s")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "if this process dies, they finish the job") {
		t.Fatalf("the run did not copy its journal to two members\n%s", r.stderr)
	}
	forgot := 0
	for _, p := range peers {
		for _, j := range swarmJobs(t, p) {
			t.Errorf("member %s still lists job %s (%s, %s, owner %s)", p.name, j.ID[:12], j.Name, j.State, j.Owner)
		}
		if strings.Contains(p.proc.Stderr(), "ended there: forgotten") {
			forgot++
		}
		if strings.Contains(p.proc.Stderr(), "took over a job whose owner is gone") {
			t.Errorf("member %s took the job over", p.name)
		}
	}
	if forgot != 2 {
		t.Errorf("%d members forgot the job, want its two holders", forgot)
	}
	if rep := readReport(t, out); rep.Summary.Done != 64 {
		t.Errorf("%d tasks done, want 64", rep.Summary.Done)
	}
}

// TestFromSwarm: what a run does with its job as the swarm knows it.
func TestFromSwarm(t *testing.T) {
	held := []swarmjobs.Member{{Name: "m"}}
	for _, c := range []struct {
		name          string
		f             *swarmjobs.Found
		attach, fetch bool
		epoch         uint64
	}{
		{"not in the swarm", nil, false, false, 1},
		{"running", &swarmjobs.Found{Record: &pb.Record{State: swarmjobs.StateRunning, Epoch: 2}}, true, false, 0},
		{"complete, output held", &swarmjobs.Found{Record: &pb.Record{State: swarmjobs.StateComplete, Epoch: 2}, Results: held}, false, true, 0},
		{"complete, no output held", &swarmjobs.Found{Record: &pb.Record{State: swarmjobs.StateComplete, Epoch: 2}}, false, false, 3},
		{"failed", &swarmjobs.Found{Record: &pb.Record{State: swarmjobs.StateFailed, Epoch: 3}, Results: held}, false, false, 4},
	} {
		attach, fetch, epoch := fromSwarm(c.f)
		if attach != c.attach || fetch != c.fetch || epoch != c.epoch {
			t.Errorf("%s: attach %v fetch %v epoch %d, want %v %v %d", c.name, attach, fetch, epoch, c.attach, c.fetch, c.epoch)
		}
	}
}
