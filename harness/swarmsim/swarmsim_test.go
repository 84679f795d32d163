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
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin, plugin, err := Build(ctx, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, Config{Bin: bin, Plugin: plugin, Dir: dir, Peers: peers, Slots: 1, Tasks: tasks,
		TaskTime: 10 * time.Millisecond, Timeout: time.Minute, Args: []string{"--min-peers", strconv.Itoa(peers)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Leased != peers || len(res.Leases) != peers {
		t.Errorf("%d peers leased (%d first leases), want %d", res.Leased, len(res.Leases), peers)
	}
	if res.Done < tasks {
		t.Errorf("the peers sent %d results, want at least %d", res.Done, tasks)
	}
	if res.CoordCPU <= 0 || res.RSS <= 0 {
		t.Errorf("coordinator CPU %v, peak RSS %d: not measured", res.CoordCPU, res.RSS)
	}
}
