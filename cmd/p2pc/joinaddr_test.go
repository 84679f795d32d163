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
