package main

import (
	"path/filepath"
	"testing"
)

// A small job of tiny tasks on a swarm goes to every peer, about its
// slots' share each, not to the peer whose leaser answered first: each
// peer holds at most its share of the work left (sched, fair.go), so
// spreading does not depend on what ran on the machine before.
func TestTinyTasksSpreadOverPeers(t *testing.T) {
	dir := t.TempDir()
	var peers []*peer
	for _, name := range []string{"a", "b", "c", "d"} {
		peers = append(peers, startPeer(t, dir, name, 8))
	}
	spec := writeSpec(t, dir, "tiny.yaml", `
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: n, from: 0, to: 511}
`)
	// The first run warms the peers (plugin fetched, processes
	// started), as a swarm that stays up is; the second is measured.
	var out string
	for _, run := range []string{"cold", "warm"} {
		out = filepath.Join(dir, run)
		r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "4", "--join", addrs(peers))
		if r.code != 0 {
			t.Fatalf("%s run: exit %d\n%s", run, r.code, r.stderr)
		}
	}
	ran := map[string]int{}
	for _, task := range readReport(t, out).Tasks {
		ran[task.Peer]++
	}
	// A share is 128; a peer that finishes its share early takes more
	// of the others', so the bound is half a share.
	for _, p := range peers {
		if ran[p.name] < 64 {
			t.Errorf("peer %s ran %d of 512 tasks, want at least half its share (64): %v", p.name, ran[p.name], ran)
		}
	}
	t.Logf("tasks per peer: %v", ran)
}
