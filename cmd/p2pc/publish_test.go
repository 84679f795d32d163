package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestFreshPeerJoinsWarmRerun: a rerun whose files' manifests are
// remembered sends its hello without publishing the plugin and the
// inputs; they are put only when a peer asks for a block, and a peer with
// an empty cache joining such a rerun still gets every block, verified,
// and runs tasks.
func TestFreshPeerJoinsWarmRerun(t *testing.T) {
	dir := t.TempDir()
	in := make([]byte, 3<<20+1234) // four blocks
	rand.Read(in)
	if err := os.WriteFile(filepath.Join(dir, "in.bin"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, dir, "echo.yaml", inputEchoSpec)
	// The memo of manifests lives in the shared data folder: start cold.
	old, _ := filepath.Glob(filepath.Join(dataDir, "plugins", "memo", "manifest-*"))
	for _, f := range old {
		os.Remove(f)
	}
	run := func(name string, p *peer) []string {
		t.Helper()
		out := filepath.Join(dir, "out-"+name)
		r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "1",
			"--join", p.addr, "--trace-phases", "--no-progress")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, r.code, r.stderr)
		}
		rep := readReport(t, out)
		checkOnce(t, rep)
		if s := sharesOf(rep); s[p.name] != len(rep.Tasks) {
			t.Fatalf("%s: shares %v, want every task on %s", name, s, p.name)
		}
		names, _ := phasesOf(r.stderr)
		t.Logf("%s: phases %q", name, names)
		return names
	}
	const published, recalled = "job published", "job hello recalled (blocks published when a peer asks)"
	has := func(names []string, phase string) bool { return slices.Contains(names, phase) }

	warm := startPeer(t, dir, "warm", 2)
	if names := run("cold", warm); !has(names, published) || has(names, recalled) {
		t.Fatalf("first run: want the job published before its hello, got phases %q", names)
	}
	if names := run("rerun", warm); !has(names, recalled) || has(names, published) {
		t.Fatalf("rerun with a peer that holds every file: want nothing published, got phases %q", names)
	}
	// The warm peer goes first: it would learn of the rerun by gossip and,
	// with every file at hand, could take all its tasks before the fresh
	// one has fetched a block (on a loaded machine it once did).
	warm.proc.Stop(5 * time.Second)
	fresh := startPeer(t, dir, "fresh", 2)
	if names := run("fresh", fresh); !has(names, recalled) || !has(names, published) {
		t.Fatalf("rerun with a fresh peer: want the blocks published on its demand, got phases %q", names)
	}
}
