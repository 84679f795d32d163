package swarmsim

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestLightPeersAllLeased runs a real p2pc run against a handful of
// light peers over mutual TLS: every peer must get a lease (each proves
// an identity of its own: two peers of one identity would be refused),
// and every task must come back done. --min-peers holds the tasks until
// all have enrolled, so that none is left without work by chance.
func TestLightPeersAllLeased(t *testing.T) {
	const peers, tasks = 5, 30
	res := buildAndRun(t, Config{Peers: peers, Slots: 1, Tasks: tasks, TaskTime: 10 * time.Millisecond,
		Timeout: time.Minute, Args: []string{"--min-peers", strconv.Itoa(peers)}})
	if res.Leased != peers || len(res.Leases) != peers {
		t.Errorf("%d peers leased (%d first leases), want %d", res.Leased, len(res.Leases), peers)
	}
	// Each peer's Hello comes before its first lease: so does the k-th
	// of them in time.
	if len(res.Hellos) != peers {
		t.Errorf("%d peers got a Hello, want %d", len(res.Hellos), peers)
	}
	for i := range min(len(res.Hellos), len(res.Leases)) {
		if res.Hellos[i] <= 0 || res.Hellos[i] > res.Leases[i] {
			t.Errorf("Hello %d at %v, lease at %v", i, res.Hellos[i], res.Leases[i])
		}
	}
	if res.Done < tasks {
		t.Errorf("the peers sent %d results, want at least %d", res.Done, tasks)
	}
	if res.CoordCPU <= 0 || res.RSS <= 0 {
		t.Errorf("coordinator CPU %v, peak RSS %d: not measured", res.CoordCPU, res.RSS)
	}
}

// TestSilentStaticPeerHoldsNobodyBack: a --join address that does not
// answer its Info call holds back no other peer's enrolment. The silent
// peer answers only once every other peer got its Hello; asked one
// after the other, or all before anyone is enrolled, the coordinator
// gave up on the silent peer first (its Info timeout), then enrolled
// the others.
func TestSilentStaticPeerHoldsNobodyBack(t *testing.T) {
	const peers, tasks = 4, 40
	res := buildAndRun(t, Config{Peers: peers, Slots: 1, Tasks: tasks, Silent: 1, TaskTime: 10 * time.Millisecond,
		Timeout: 2 * time.Minute, Args: []string{"--min-peers", strconv.Itoa(peers)}})
	if res.LastHello <= 0 {
		t.Fatal("a peer that answered got no Hello")
	}
	if res.SilentGaveUp > 0 && res.SilentGaveUp < res.LastHello {
		t.Errorf("the coordinator gave up on the silent peer at %v, before the last of the others got its Hello at %v: they waited for it",
			res.SilentGaveUp, res.LastHello)
	}
}

// buildAndRun builds p2pc and the echo plugin of this repository and runs
// cfg with them (Bin, Plugin and Dir are set here).
func buildAndRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // building on a busy machine is slow
	defer cancel()
	if cfg.Bin, cfg.Plugin, err = Build(ctx, root, cfg.Dir); err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
