package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddressScheme: --listen and --join take addresses with the tcp
// scheme; a node prints its address in canonical form (tcp without the
// scheme) and a run reaches it through a --join with the scheme. A scheme
// that no transport serves is refused at once, naming it.
func TestAddressScheme(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	p := startPeerAt(t, dir, "s1", "tcp://127.0.0.1:0", 2)
	if strings.Contains(p.addr, "://") {
		t.Fatalf("node prints %q: a tcp address is canonical without its scheme", p.addr)
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 3))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", "tcp://"+p.addr)
	if r.code != 0 {
		t.Fatalf("run --join tcp://%s: exit %d\n%s", p.addr, r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	if n := sharesOf(rep)["s1"]; n != len(rep.Tasks) {
		t.Errorf("peer s1 ran %d of %d tasks", n, len(rep.Tasks))
	}
	for _, args := range [][]string{
		{"join", "--no-mdns", "--listen", "quic://127.0.0.1:0"},
		{"blocks", "serve", "--listen", "quic://127.0.0.1:0"},
		{"run", spec, "--out", filepath.Join(dir, "out2"), "--no-mdns", "--local-slots", "0", "--join", "quic://" + p.addr},
	} {
		r := p2pc(t, args...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, `"quic"`) || strings.Contains(r.stdout, "listening") {
			t.Errorf("%s: exit %d, want %d naming the scheme\n%s", strings.Join(args, " "), r.code, exitBadInput, r.stderr)
		}
	}
}
