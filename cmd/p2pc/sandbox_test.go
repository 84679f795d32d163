package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/discovery"
)

var confinedRe = regexp.MustCompile(`tasks confined: (.*) allow-network=`)

// TestPeersShowConfinement: `p2pc join` prints how it confines tasks, and
// `p2pc peers` (table and JSON) shows the same for that peer, carried in
// its gossiped metadata. A peer run as root runs tasks as another user.
func TestPeersShowConfinement(t *testing.T) {
	dir := t.TempDir()
	pr := startPeer(t, dir, "c1", 1)
	waitStderr(t, pr.proc, confinedRe)
	confined := confinedRe.FindStringSubmatch(pr.proc.Stderr())[1]
	if os.Geteuid() == 0 && (!strings.Contains(confined, " user=") || strings.Contains(confined, "user=own:")) {
		t.Errorf("a root peer runs tasks as itself: %q", confined)
	}
	r := p2pc(t, "peers", "--no-mdns", "--join", pr.addr, "--wait", "1s", "--json")
	if r.code != 0 {
		t.Fatalf("p2pc peers: exit %d\n%s", r.code, r.stderr)
	}
	var members []discovery.Member
	if err := json.Unmarshal([]byte(r.stdout), &members); err != nil {
		t.Fatalf("p2pc peers --json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, m := range members {
		if m.Name == "c1" {
			found = true
			if m.Sandbox != confined {
				t.Errorf("p2pc peers says c1 confines tasks with %q, c1 says %q", m.Sandbox, confined)
			}
		}
	}
	if !found {
		t.Fatalf("p2pc peers does not list c1:\n%s", r.stdout)
	}
	r = p2pc(t, "peers", "--no-mdns", "--join", pr.addr, "--wait", "1s")
	if !strings.Contains(r.stdout, "TASKS CONFINED") || !strings.Contains(r.stdout, confined) {
		t.Errorf("p2pc peers table lacks c1's confinement %q:\n%s", confined, r.stdout)
	}
}
