package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pluginStarted is what a peer logs (at debug level) for each plugin
// process it starts (internal/pluginhost).
const pluginStarted = "plugin started"

// A rerun of a job finds its plugin processes warm on every peer, also on
// a peer that got no task the first time: no peer starts a plugin process
// during the rerun. Issue 16: "warm" tracker runs that started dozens of
// confined processes on the peers new to the job's work were up to 30x
// slower than the others.
func TestRerunStartsNoPlugin(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "w1", 4, "--log-level", "debug"), startPeer(t, dir, "w2", 4, "--log-level", "debug")}
	spec := writeSpec(t, dir, "one.yaml", "plugin: {{repo}}/plugins/echo\ntasks:\n  - range: {param: n, from: 0, to: 0}\n")
	run := func(out string) {
		t.Helper()
		r := p2pc(t, "run", spec, "--out", filepath.Join(dir, out), "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers))
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", out, r.code, r.stderr)
		}
	}
	starts := func() []int {
		var n []int
		for _, p := range peers {
			n = append(n, strings.Count(p.proc.Stderr(), pluginStarted))
		}
		return n
	}
	run("first")
	for _, p := range peers { // one of them ran the task, the other none
		waitLog(t, p, pluginStarted, 10*time.Second)
	}
	before := starts()
	for i, n := range before {
		if n != 1 {
			t.Errorf("%s started %d plugin processes for one task, want 1", peers[i].name, n)
		}
	}
	run("again")
	if after := starts(); after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("plugin processes started per peer: %v after the first run, %v after the rerun: want none in the rerun", before, after)
	}
}
