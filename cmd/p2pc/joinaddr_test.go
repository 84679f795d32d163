package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestJoinAddressesChecked: a --join entry that is no address is refused
// at once (exit 2, naming the entry) by join, run and peers alike, as a
// bad port is; a name that does not resolve is said within seconds.
func TestJoinAddressesChecked(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 1))
	for _, bad := range []struct{ entry, want string }{
		{"not an address", `--join: peer address 2 "not an address": "not an address" is neither an IP address nor a host name`},
		{"127.0.0.1:notaport", `--join: peer address 2 "127.0.0.1:notaport": port must be 1-65535`},
		{"host/x:7070", `--join: peer address 2 "host/x:7070": "host/x" is neither an IP address nor a host name`},
	} {
		join := "127.0.0.1:1," + bad.entry
		for _, args := range [][]string{
			{"join", "--no-mdns", "--listen", "127.0.0.1:0", "--join", join},
			{"run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", join},
			{"peers", "--no-mdns", "--join", join},
		} {
			start := time.Now()
			r := p2pc(t, args...)
			if r.code != exitBadInput || !strings.Contains(r.stderr, bad.want) || strings.Contains(r.stdout, "listening") {
				t.Errorf("%s --join %q: exit %d, want %d saying %q\n%s", args[0], join, r.code, exitBadInput, bad.want, r.stderr)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%s --join %q: took %s to refuse", args[0], join, d)
			}
		}
	}
	if !harness.InPrivateNetns() { // a name lookup may leave the machine otherwise
		t.Skip("no private network namespace: a --join name that does not resolve is not tried")
	}
	p, _, _ := startJoin(t, dir, "unres", nil, "--join", "nosuchhost.invalid")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := p.WaitStderr(ctx, regexp.MustCompile(`level=WARN.*the name nosuchhost.invalid does not resolve`)); err != nil {
		t.Errorf("join --join NAME that does not resolve: %v", err)
	}
}

// TestWaitPeersSaysStalled: a run that --wait-peers ends, with no task
// failed, says that the work was left undone and how much, not that
// tasks failed; exit code 3 (README: no peer could take the work left).
func TestWaitPeersSaysStalled(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 3))
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0", "--join", "127.0.0.1:1", "--wait-peers", "2s", "--no-progress")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	for _, want := range []string{
		`(?m)^job echo \(\w+\) stalled after [0-9.]+m?s: 0 of 4 tasks done, 4 left undone \(no peer could take them within --wait-peers\)$`,
		`(?m)gave up after waiting 2s for a peer that can take the work \(--wait-peers\): job stalled: 4 tasks left undone \(run it again to resume\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", want, r.stderr)
		}
	}
	if regexp.MustCompile(`tasks failed|\) failed|[1-9][0-9]* failed`).MatchString(r.stderr) {
		t.Errorf("no task failed, but the run says so:\n%s", r.stderr)
	}
}
