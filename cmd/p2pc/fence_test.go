package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/trust"
)

// TestSameJobFromAnotherNode: a job run to its end from one node, then
// the same job (same spec, so the same job ID) from another node of a
// higher node ID. Both runs own their job at epoch 1 (peers are present,
// so each replicates it); the second is another run, not a second owner
// of the first one, and the peers must not fence it off (they did: "two
// owners of epoch 1; the one of the lower node ID keeps it").
func TestSameJobFromAnotherNode(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "f1", 1), startPeer(t, dir, "f2", 1)}
	spec := writeSpec(t, dir, "same.yaml", fmt.Sprintf(slowEcho, "same", 20, 8))
	// Two node identities, the lower first.
	datas := []string{filepath.Join(dir, "node-x"), filepath.Join(dir, "node-y")}
	var ids []string
	for _, d := range datas {
		id, err := trust.LoadIdentity(d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.ID.String())
	}
	if ids[0] > ids[1] {
		datas[0], datas[1] = datas[1], datas[0]
	}
	for i, d := range datas {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		r := p2pc(t, "--data", d, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers))
		if r.code != 0 {
			t.Fatalf("run %d (from %s): exit %d\n%s", i, filepath.Base(d), r.code, r.stderr)
		}
		checkOnce(t, readReport(t, out))
	}
}
