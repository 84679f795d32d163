package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestForeignSwarmLoggedOnce: two swarms on one LAN (mDNS in the private
// network namespace) find each other and gossip at each other every few
// seconds; each node says so once per source, then only counts.
func TestForeignSwarmLoggedOnce(t *testing.T) {
	harness.RequirePrivateNetns(t)
	dir := t.TempDir()
	tokA, err := harness.NewSwarmToken()
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := harness.NewSwarmToken()
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := startJoinMDNS(t, dir, "fa", true, []string{"P2PC_SWARM=" + tokA}, "--log-level", "debug")
	startJoinMDNS(t, dir, "fb", true, []string{"P2PC_SWARM=" + tokB})
	// Bounded: the foreign gossip arrives every 2 s; on the old code the
	// count never shows and a dozen ERROR lines pile up instead.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	counted := regexp.MustCompile(`gossip of another swarm ignored.*count=3`)
	_, werr := a.WaitStderr(ctx, counted)
	lines := map[string]int{}
	src := regexp.MustCompile(`source=(\S+)|from=([^: ]+)`)
	for _, l := range strings.Split(a.Stderr(), "\n") {
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "decrypt") ||
			strings.Contains(l, "could not join an announced peer") { // once per address already

			continue
		}
		m := src.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a line about foreign gossip names no source: %s", l)
			continue
		}
		lines[m[1]+m[2]]++
	}
	for s, n := range lines {
		if n > 1 {
			t.Errorf("%d WARN/ERROR lines about foreign gossip from %s, want 1", n, s)
		}
	}
	if len(lines) == 0 {
		t.Errorf("no line says that a foreign swarm's gossip is ignored")
	}
	if werr != nil {
		t.Errorf("the ignored foreign gossip is not counted at debug level: %v", werr)
	}
	if t.Failed() {
		t.Logf("fa's log:\n%s", a.Stderr())
	}
}
