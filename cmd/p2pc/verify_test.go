package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/report"
)

// localDigests runs spec on this machine alone and returns each task's
// digest: the honest answers.
func localDigests(t *testing.T, spec, out string) map[string]string {
	t.Helper()
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	d := map[string]string{}
	for _, task := range readReport(t, out).Tasks {
		d[task.ID] = task.Digest
	}
	return d
}

// startPeerOnHost starts a peer listening on 127.0.0.<host>: replicas of
// a verified task go to distinct hosts (verify.distinct_hosts), and each
// loopback address is a host of its own to the coordinator.
func startPeerOnHost(t *testing.T, dir, name string, host, slots int, extra ...string) *peer {
	t.Helper()
	return startPeerAt(t, dir, name, fmt.Sprintf("127.0.0.%d:0", host), slots, extra...)
}

const verifiedMandelbrot = `
name: verified
plugin: {{repo}}/plugins/mandelbrot
params: {width: 160, height: 120, max_iter: 100, bands: 24}
tasks:
  - range: {param: band, from: 0, to: 23}
reduce: true
verify: {%s}
`

func TestVerifyOneLiar(t *testing.T) {
	// Serial: beside other tests its timing (batch sizes, the liar's
	// votes before the honest peers end the job) missed its bounds in CI.
	dir := t.TempDir()
	var peers []*peer
	for i := range 4 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("h%d", i), i+2, 1))
	}
	liar := startPeerOnHost(t, dir, "liar", 6, 2, "--fault-lie-rate", "1")
	peers = append(peers, liar)
	// 48 tasks of some milliseconds each, so that the liar, whatever its
	// start under load, votes at least sched.ExcludeAfter times: with 24
	// sub-millisecond tasks it once voted only twice in CI before honest
	// peers had done the whole job.
	spec := writeSpec(t, dir, "v.yaml", strings.NewReplacer("bands: 24", "bands: 48", "to: 23", "to: 47", "max_iter: 100", "max_iter: 1500").Replace(fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2")))
	honest := localDigests(t, spec, filepath.Join(dir, "local"))

	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "5", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	liarVotes := 0
	for _, task := range rep.Tasks {
		if task.Digest != honest[task.ID] {
			t.Errorf("task %s: accepted a wrong result (%.12s, honest %.12s), votes %v", task.ID, task.Digest, honest[task.ID], task.Votes)
		}
		if task.Peer == "liar" {
			t.Errorf("task %s: the liar's output was accepted", task.ID)
		}
		for _, v := range task.Votes {
			if v.Peer == "liar" {
				liarVotes++
			}
		}
	}
	excluded := false
	for _, e := range rep.Excluded {
		excluded = excluded || e.Peer == "liar"
	}
	if !excluded {
		t.Errorf("the liar was not excluded; report: excluded %v, peers %v", rep.Excluded, rep.Peers)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(dir, "local", "mandelbrot.png"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("verified PNG differs from the local one")
	}
	t.Logf("liar voted %d times before exclusion; excluded: %+v; peers: %+v", liarVotes, rep.Excluded, rep.Peers)
}

func TestVerifyColludingLiars(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; TestVerifyOneLiar covers voting in -short")
	}
	dir := t.TempDir()
	var peers []*peer
	for i := range 3 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("h%d", i), i+2, 1))
	}
	for i := range 2 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("liar%d", i), i+5, 1, "--fault-lie-rate", "1", "--fault-lie-collude"))
	}
	spec := writeSpec(t, dir, "v.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 2, quorum: 2, max_replicas: 5"))
	honest := localDigests(t, spec, filepath.Join(dir, "local"))

	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "5", "--join", addrs(peers))
	if r.code != 0 && r.code != exitTaskFailed {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	disputed, failed := 0, 0
	for _, task := range rep.Tasks {
		digests := map[string]bool{}
		for _, v := range task.Votes {
			digests[v.Digest] = true
		}
		if len(digests) > 1 {
			disputed++
		}
		switch task.State {
		case report.TaskDone:
			if task.Digest != honest[task.ID] {
				t.Errorf("task %s: silently accepted a wrong result; votes %v, verdict %q", task.ID, task.Votes, task.Verdict)
			}
		case report.TaskFailed:
			failed++
			if task.Verdict == "" {
				t.Errorf("task %s failed without a verdict", task.ID)
			}
		default:
			t.Errorf("task %s: state %s", task.ID, task.State)
		}
	}
	if disputed == 0 {
		t.Errorf("no disagreement was detected")
	}
	if r.code == exitTaskFailed && failed == 0 {
		t.Errorf("exit %d but no task failed", r.code)
	}
	t.Logf("exit %d; %d tasks disputed, %d failed loudly; excluded %+v; peers %+v", r.code, disputed, failed, rep.Excluded, rep.Peers)
}

// TestSpotCheckCatchesColludingMajority: two colluding liars of three peers
// win every vote (replicas 3, quorum 2); spot checks on the submitter's
// own slot catch them, and every output ends up right.
func TestSpotCheckCatchesColludingMajority(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeerOnHost(t, dir, "h0", 2, 1)}
	for i := range 2 {
		peers = append(peers, startPeerOnHost(t, dir, fmt.Sprintf("liar%d", i), i+3, 1, "--fault-lie-rate", "1", "--fault-lie-collude"))
	}
	plain := writeSpec(t, dir, "v.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2"))
	spot := writeSpec(t, dir, "s.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2, spot_check: 0.5"))
	honest := localDigests(t, plain, filepath.Join(dir, "local"))
	run := func(spec, out string) (result, *report.Report) {
		r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "3", "--wait-peers", "20s", "--join", addrs(peers))
		return r, readReport(t, out)
	}

	// Without spot checks the colluding majority wins.
	_, rep := run(plain, filepath.Join(dir, "plain"))
	wrong := 0
	for _, task := range rep.Tasks {
		if task.State == report.TaskDone && task.Digest != honest[task.ID] {
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatalf("without spot checks no wrong output was accepted: the test shows nothing (tasks %+v)", rep.Tasks)
	}
	t.Logf("without spot checks: %d of %d outputs accepted wrong", wrong, len(rep.Tasks))

	out := filepath.Join(dir, "spot")
	r, rep := run(spot, out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, task := range rep.Tasks {
		if task.State != report.TaskDone || task.Digest != honest[task.ID] {
			t.Errorf("task %s: %s with %.12s, honest %.12s; votes %v, verdict %q", task.ID, task.State, task.Digest, honest[task.ID], task.Votes, task.Verdict)
		}
	}
	if rep.SpotChecks == nil || len(rep.SpotChecks.Caught) == 0 {
		t.Fatalf("report.json names no caught spot check: %+v", rep.SpotChecks)
	}
	excluded := map[string]bool{}
	for _, e := range rep.Excluded {
		excluded[e.Peer] = true
	}
	if !excluded["liar0"] || !excluded["liar1"] || excluded["h0"] {
		t.Errorf("excluded %+v, want liar0 and liar1 only", rep.Excluded)
	}
	if !strings.Contains(r.stderr, "spot checks:") || !strings.Contains(r.stderr, "excluded as liars: liar") {
		t.Errorf("the summary does not report the spot checks:\n%s", r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(dir, "local", "mandelbrot.png"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("spot-checked PNG differs from the local one")
	}
	t.Logf("spot checks: %d re-run, %d caught; excluded %+v", rep.SpotChecks.Checked, len(rep.SpotChecks.Caught), rep.Excluded)
}

// TestOneNodeOneVote: a liar gossips a made-up member "ghost" at its own
// address, claiming its own node ID; later a second member gossips
// "ghost2" claiming a node ID it cannot prove. The coordinator counts the
// liar once: ghost (or the liar, whichever comes second) is refused while
// the other's session is open, ghost2 at enrolment. On the old code the
// liar voted twice: with one honest peer and replicas 3, quorum 2, every
// lie was accepted and the honest peer excluded.
func TestOneNodeOneVote(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "v.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 3, quorum: 2"))
	honest := localDigests(t, spec, filepath.Join(dir, "local"))
	peers := []*peer{
		startPeerOnHost(t, dir, "honest", 2, 1),
		startPeerOnHost(t, dir, "liar", 3, 2, "--fault-lie-rate", "1", "--fault-ghost", "ghost"),
	}
	check := func(rep *report.Report) {
		t.Helper()
		for _, task := range rep.Tasks {
			if task.State == report.TaskDone && task.Digest != honest[task.ID] {
				t.Errorf("task %s: accepted a lie (%.12s, honest %.12s), votes %v", task.ID, task.Digest, honest[task.ID], task.Votes)
			}
			ids := map[string]bool{}
			for _, v := range task.Votes {
				if v.Peer == "ghost2" || (v.PeerID != "" && ids[v.PeerID]) {
					t.Errorf("task %s: one node voted twice, or under a made-up ID: %v", task.ID, task.Votes)
				}
				ids[v.PeerID] = true
			}
		}
		for _, e := range rep.Excluded {
			// Whichever of liar and ghost enrolled first is the liar's one worker.
			if e.Peer != "liar" && e.Peer != "ghost" {
				t.Errorf("excluded %s, an honest voter: %+v", e.Peer, rep.Excluded)
			}
		}
	}
	const busy = "peer not enrolled while its node ID has a session under another name"

	// One honest peer and one liar are two voters: their dispute has no
	// quorum, and the tasks fail loudly rather than take the liar's word
	// twice (--wait-peers bounds a wait for voters that never come).
	out := filepath.Join(dir, "two")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2",
		"--stall-after", "2s", "--wait-peers", "4s", "--join", addrs(peers))
	if r.code == 0 {
		t.Errorf("two voters for replicas 3: exit 0, want a failure\n%s", r.stderr)
	}
	check(readReport(t, out))
	if n := strings.Count(r.stderr, busy); n != 1 {
		t.Errorf("the second name of the liar's node ID was logged %d times, want once:\n%s", n, r.stderr)
	}

	// With a third node (behind a made-up member of its own) and the
	// submitter's slot, the honest answer wins every vote.
	other := startPeerOnHost(t, dir, "other", 4, 1, "--fault-ghost", "ghost2", "--fault-ghost-id", strings.Repeat("ab", 32))
	peers = append(peers, other)
	out = filepath.Join(dir, "out")
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1", "--min-peers", "3", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	check(rep)
	if n := strings.Count(r.stderr, "its gossiped node ID is not the one its handshake proved"); n != 1 {
		t.Errorf("the forged gossiped ID was logged %d times, want once:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, busy); n != 1 {
		t.Errorf("the second name of the liar's node ID was logged %d times, want once:\n%s", n, r.stderr)
	}
	t.Logf("excluded %+v; peers %+v", rep.Excluded, rep.Peers)
}

// TestForgedResultsCount: a member sends, with each result, results for
// leases it never held. Each is a malformed result: logged once, a
// strike, and exclusion at --strikes; the honest peer finishes the job.
func TestForgedResultsCount(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{
		startPeer(t, dir, "honest", 1),
		startPeer(t, dir, "forger", 1, "--fault-forge", "2"),
	}
	spec := writeSpec(t, dir, "f.yaml", fmt.Sprintf(verifiedMandelbrot, "replicas: 1"))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--strikes", "3", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	var excl []string
	for _, e := range rep.Excluded {
		excl = append(excl, e.Peer+": "+e.Reason)
	}
	if len(excl) != 1 || !strings.HasPrefix(excl[0], "forger: sent 3 malformed results") || !strings.Contains(excl[0], "does not hold") {
		t.Errorf("excluded %q, want the forger for 3 malformed results", excl)
	}
	if n := strings.Count(r.stderr, "peer sent a result for a lease it does not hold"); n != 1 {
		t.Errorf("forged results logged %d times, want once:\n%s", n, r.stderr)
	}
	for _, task := range rep.Tasks {
		if task.State != report.TaskDone {
			t.Errorf("task %s: %s", task.ID, task.State)
		}
	}
}

// twoFiles is an exec job whose tasks write the files a = x and b = y.
const twoFiles = `
name: two
plugin: {{repo}}/plugins/exec
params:
  command: ["printf x > a; printf y > b"]
  shell: true
  stdout: false
  outputs: [a, b]
tasks:
  - range: {param: n, from: 1, to: 3}
`

// TestOutputNameCollision: an exec output named "a\n<sha256 of y> 1 b"
// holding x listed as the same digest as the outputs a = x, b = y (the
// listing did not encode names). Such a name is refused now, on the peer
// that ran the task, with a clear error, and the job fails.
func TestOutputNameCollision(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "p", 2)}
	run := func(spec, out string) result {
		return p2pc(t, "run", spec, "--out", out, "--no-mdns", "--no-progress", "--local-slots", "0", "--join", addrs(peers))
	}
	out := filepath.Join(dir, "honest")
	if r := run(writeSpec(t, dir, "honest.yaml", twoFiles), out); r.code != 0 {
		t.Fatalf("honest job: exit %d\n%s", r.code, r.stderr)
	}
	honest := readReport(t, out).Tasks[0].Digest

	name := "a\n" + digest.Sum([]byte("y")).String() + " 1 b"
	q := strconv.Quote(name) // a YAML double-quoted string as well
	forged := `
name: forged
plugin: {{repo}}/plugins/exec
params:
  command: ["printf x > \"$NAME\""]
  shell: true
  stdout: false
  env: {NAME: ` + q + `}
  outputs: [` + q + `]
tasks:
  - range: {param: n, from: 1, to: 3}
`
	out = filepath.Join(dir, "forged")
	r := run(writeSpec(t, dir, "forged.yaml", forged), out)
	rep := readReport(t, out)
	for _, task := range rep.Tasks {
		if task.State == report.TaskDone && task.Digest == honest {
			t.Errorf("task %s: other files, the honest digest %.12s", task.ID, task.Digest)
		}
	}
	if r.code == 0 || !strings.Contains(r.stderr, "control character") {
		t.Errorf("forged name: exit %d, want a failure naming the control character\n%s", r.code, r.stderr)
	}
}

// TestResumeLegacyDigests: a job folder whose database holds digests of
// the listing before names were length-prefixed (version 1) is resumed:
// outputs that match them are done, as they were; one that matches no
// version runs again.
func TestResumeLegacyDigests(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "two.yaml", twoFiles)
	out := filepath.Join(dir, "out")
	if r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Rewrite the digests as a p2pc of listing version 1 recorded them,
	// and spoil the last task's.
	ctx := context.Background()
	db, err := jobdb.Open(ctx, filepath.Join(out, jobdb.FileName), jobdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tasks := readReport(t, out).Tasks
	for i, task := range tasks {
		id := task.ID
		d, _, err := outputs.DigestAll(filepath.Join(out, "tasks", id))
		if err != nil {
			t.Fatal(err)
		}
		old := d.Legacy.String()
		if i == len(tasks)-1 {
			old = strings.Repeat("0", 64)
		}
		if _, err := db.SQL().ExecContext(ctx, `UPDATE tasks SET digest = ? WHERE id = ?`, old, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "1")
	if r.code != 0 || !strings.Contains(r.stderr, "resuming: 2 of 3 tasks already done") {
		t.Fatalf("resume of a version 1 folder: exit %d, want 2 of 3 tasks reused\n%s", r.code, r.stderr)
	}
}
