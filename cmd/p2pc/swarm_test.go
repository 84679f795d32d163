package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/harness/bench"
	"github.com/p2pc/p2pc/internal/report"
)

// peer is a running `p2pc join`.
type peer struct {
	name, addr, data string
	proc             *harness.Proc
}

var listenRe = regexp.MustCompile(`listening (\S+) name (\S+)`)

// startPeer starts `p2pc join` on loopback and waits until it listens.
// Its data folder is kept across restarts (same name -> same folder).
func startPeer(t *testing.T, dir, name string, slots int, extra ...string) *peer {
	t.Helper()
	return startPeerAt(t, dir, name, "127.0.0.1:0", slots, extra...)
}

func startPeerAt(t *testing.T, dir, name, listen string, slots int, extra ...string) *peer {
	t.Helper()
	return startPeerBin(t, p2pcBin, dir, name, listen, slots, extra...)
}

// startPeerBin is startPeerAt with another p2pc binary (another platform's).
func startPeerBin(t *testing.T, bin, dir, name, listen string, slots int, extra ...string) *peer {
	t.Helper()
	data := filepath.Join(dir, name)
	args := append([]string{"--data", data, "join", "--listen", listen, "--name", name, "--slots", fmt.Sprint(slots)}, extra...)
	p, err := harness.Start(bin, args, harness.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.WaitOutput(ctx, listenRe)
	if err != nil {
		p.Kill()
		t.Fatal(err)
	}
	pr := &peer{name: name, addr: m[1], data: data, proc: p}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if err := p.CheckLogs(); err != nil {
			t.Error(err)
		}
	})
	return pr
}

func addrs(ps []*peer) string {
	var a []string
	for _, p := range ps {
		a = append(a, p.addr)
	}
	return strings.Join(a, ",")
}

// sharesOf counts accepted results per peer.
func sharesOf(rep *report.Report) map[string]int {
	m := map[string]int{}
	for _, t := range rep.Tasks {
		m[t.Peer]++
	}
	return m
}

// checkOnce fails unless every task is done with exactly one accepted
// (ok, not superseded) attempt.
func checkOnce(t *testing.T, rep *report.Report) {
	t.Helper()
	for _, e := range bench.NotAcceptedOnce(rep) {
		t.Error(e)
	}
}

func TestSwarmStaticPeers(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "p1", 2), startPeer(t, dir, "p2", 2), startPeer(t, dir, "p3", 2)}
	spec := writeSpec(t, dir, "m.yaml", fmt.Sprintf(mandelbrotSpec, 32, 31))
	out := filepath.Join(dir, "out")
	// Every peer enrols before a task is handed out, so each takes part.
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "3", "--join", addrs(peers))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	shares := sharesOf(rep)
	for _, p := range peers {
		if shares[p.name] == 0 {
			t.Errorf("peer %s ran no task: %v", p.name, shares)
		}
	}
	local := filepath.Join(dir, "local")
	if r := p2pc(t, "run", spec, "--out", local, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(local, "mandelbrot.png"))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatalf("swarm PNG (%d bytes) differs from local PNG (%d bytes)", len(a), len(b))
	}
	t.Logf("shares: %v", shares)
}

func TestSwarmSurvivesKills(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; peers killed mid-job: TestCheckpointResumeAfterKill covers SIGKILL in -short")
	}
	dir := t.TempDir()
	var peers []*peer
	for i := range 4 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("k%d", i), 2))
	}
	spec := writeSpec(t, dir, "k.yaml", `
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 200}
retries: 0
tasks:
  - range: {param: n, from: 0, to: 255}
`)
	out := filepath.Join(dir, "out")
	start := time.Now()
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers)}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	kills := 0
	victim := 0
loop:
	for {
		select {
		case <-run.Done():
			break loop
		case <-time.After(1500 * time.Millisecond):
		}
		// Kill one peer with SIGKILL, restart it (same name, same data) a
		// moment later, and move on to the next.
		p := peers[victim%len(peers)]
		p.proc.Kill()
		kills++
		select {
		case <-run.Done():
			break loop
		case <-time.After(500 * time.Millisecond):
		}
		peers[victim%len(peers)] = restart(t, dir, p)
		victim++
	}
	code, err := run.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d after %d kills\n%s", code, kills, run.Stderr())
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	lost := 0
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeLost {
				lost++
			}
		}
	}
	if kills == 0 {
		t.Fatal("the job ended before any kill")
	}
	t.Logf("survived %d kills in %s; %d leases lost and requeued; shares %v", kills, time.Since(start).Round(time.Millisecond), lost, sharesOf(rep))
}

// restart starts a killed peer again with the same name, address and
// data folder.
func restart(t *testing.T, dir string, p *peer) *peer {
	t.Helper()
	return startPeerAt(t, dir, p.name, p.addr, 2)
}

func TestTwoSubmitters(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow; TestSwarmStaticPeers covers the swarm in -short")
	}
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "t1", 2), startPeer(t, dir, "t2", 2), startPeer(t, dir, "t3", 2)}
	var runs []*harness.Proc
	for i := range 2 {
		spec := writeSpec(t, dir, fmt.Sprintf("j%d.yaml", i), fmt.Sprintf(`
name: job%d
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 100, job: %d}
tasks:
  - range: {param: n, from: 0, to: 29}
`, i, i))
		p, err := harness.Start(p2pcBin, []string{"--data", filepath.Join(dir, fmt.Sprintf("sub%d", i)), "run", spec, "--out", filepath.Join(dir, fmt.Sprintf("out%d", i)), "--no-mdns", "--local-slots", "0", "--join", addrs(peers)}, harness.Options{Name: fmt.Sprintf("run%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, p)
	}
	var reps []*report.Report
	for i, p := range runs {
		code, err := p.Wait(2 * time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s", i, code, p.Stderr())
		}
		rep := readReport(t, filepath.Join(dir, fmt.Sprintf("out%d", i)))
		checkOnce(t, rep)
		reps = append(reps, rep)
	}
	// Neither starved: the two jobs ran at the same time, each on the peers.
	first := func(r *report.Report) (time.Time, time.Time) {
		var lo, hi time.Time
		for _, task := range r.Tasks {
			for _, a := range task.Attempts {
				if lo.IsZero() || a.Start.Before(lo) {
					lo = a.Start
				}
				if a.End.After(hi) {
					hi = a.End
				}
			}
		}
		return lo, hi
	}
	s0, e0 := first(reps[0])
	s1, e1 := first(reps[1])
	if s1.After(e0) || s0.After(e1) {
		t.Errorf("the jobs did not overlap: job0 %s..%s, job1 %s..%s", s0, e0, s1, e1)
	}
	for i, r := range reps {
		if len(sharesOf(r)) < 2 {
			t.Errorf("job %d ran on %v only", i, sharesOf(r))
		}
		t.Logf("job %d: %s, shares %v", i, r.Finished.Sub(r.Started).Round(time.Millisecond), sharesOf(r))
	}
}

// With mDNS alone (no --join), `p2pc run --local-slots 0` finds three
// peers and the job runs on all of them, with the same image as a local
// run. It needs the private network namespace TestMain makes.
func TestMDNSSwarm(t *testing.T) {
	if testing.Short() {
		t.Skip("slow; discovery's mDNS tests and TestSwarmStaticPeers cover it in -short")
	}
	harness.RequirePrivateNetns(t)
	dir := t.TempDir()
	var names []string
	for i := range 3 {
		p := startPeer(t, dir, fmt.Sprintf("md%d", i), 1)
		names = append(names, p.name)
	}
	spec := writeSpec(t, dir, "m.yaml", fmt.Sprintf(mandelbrotSpec, 48, 47))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--local-slots", "0", "--min-peers", "3")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	shares := sharesOf(rep)
	for _, n := range names {
		if shares[n] == 0 {
			t.Errorf("peer %s ran no task: %v", n, shares)
		}
	}
	local := filepath.Join(dir, "local")
	if r := p2pc(t, "run", spec, "--out", local, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(local, "mandelbrot.png"))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatalf("mDNS swarm PNG differs from the local one")
	}
	// `p2pc peers` lists the three of them.
	pr := p2pc(t, "peers", "--wait", "1500ms")
	for _, n := range names {
		if !strings.Contains(pr.stdout, n) {
			t.Errorf("p2pc peers does not list %s:\n%s%s", n, pr.stdout, pr.stderr)
		}
	}
	t.Logf("shares %v", shares)
}
