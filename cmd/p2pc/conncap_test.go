package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// A peer whose fd limit is 1024 gets 1100 idle TCP connections (from
// 127.0.0.2, none finishing a handshake): it caps them, says so, and a
// real job from 127.0.0.1 still runs on it.
func TestIdleConnectionFloodIsCapped(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "capped")
	args := []string{"--nofile=1024:1024", p2pcBin, "--data", data, "join", "--listen", "127.0.0.1:0", "--name", "capped", "--slots", "2"}
	p, err := harness.Start("prlimit", args, harness.Options{Name: "capped"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if err := p.CheckLogs(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.WaitOutput(ctx, listenRe)
	if err != nil {
		t.Fatal(err)
	}
	addr := m[1]

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 1100 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			break // the backlog is full: enough
		}
		flood = append(flood, c)
	}
	if len(flood) < 1024 {
		t.Logf("only %d connections opened", len(flood))
	}
	waitStderr(t, p, regexp.MustCompile(`too many connections without a finished TLS handshake; closing new ones`))

	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 7))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "20s")
	if r.code != 0 {
		t.Fatalf("job on the flooded peer: exit %d\n%s", r.code, r.stderr)
	}
	for _, task := range readReport(t, out).Tasks {
		if task.Peer != "capped" {
			t.Errorf("task %s ran on %q", task.ID, task.Peer)
		}
	}
	t.Logf("%d idle connections held during the job", len(flood))
}
