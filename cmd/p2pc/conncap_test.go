package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
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
	waitStderr(t, p, regexp.MustCompile(`too many connections without a finished TLS handshake; closing the oldest`))

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

// silentFlood holds perSource silent TCP connections to addr from each of
// sources (loopback addresses), renewed every renew, until ctx ends. It
// returns when every connection is closed.
func silentFlood(ctx context.Context, addr string, sources []net.IP, perSource int, renew time.Duration) {
	var wg sync.WaitGroup
	for _, ip := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: time.Second}
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			t := time.NewTicker(renew)
			defer t.Stop()
			for {
				for _, c := range held {
					c.Close()
				}
				held = held[:0]
				for range perSource {
					if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
						held = append(held, c)
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	wg.Wait()
}

// TestHandshakeFloodDoesNotStarveMembers: a stranger holding 40 silent
// connections from each of 8 addresses, renewed every 9 s (the peer's
// gate of unfinished handshakes full: 32 per source, 256 in all), does
// not keep a member out: the member's 32-task job finishes within twice
// its unflooded time.
func TestHandshakeFloodDoesNotStarveMembers(t *testing.T) {
	dir := t.TempDir()
	p, addr, _ := startJoin(t, dir, "door", nil)
	job := func(name string) (time.Duration, result) {
		// A job of its own each time: no result is reused.
		spec := writeSpec(t, dir, name+".yaml", fmt.Sprintf("plugin: {{repo}}/plugins/echo\nparams: {marker: %s, sleep_ms: 100}\ntasks:\n  - range: {param: n, from: 0, to: 31}\n", name))
		start := time.Now()
		r := p2pc(t, "run", spec, "--out", filepath.Join(dir, name), "--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "20s")
		return time.Since(start), r
	}
	if _, r := job("warm"); r.code != 0 { // the peer fetches and builds the plugin
		t.Fatalf("warm-up job: exit %d\n%s", r.code, r.stderr)
	}
	calm, r := job("calm")
	if r.code != 0 {
		t.Fatalf("unflooded job: exit %d\n%s", r.code, r.stderr)
	}

	// The flood stops itself: at the end of the test, or after 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var sources []net.IP
	for i := range 8 {
		sources = append(sources, net.IPv4(127, 0, 0, byte(10+i)))
	}
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		silentFlood(ctx, addr, sources, 40, 9*time.Second)
	}()
	defer func() {
		cancel()
		<-flooding
	}()
	waitStderr(t, p, regexp.MustCompile(`too many connections without a finished TLS handshake`))

	flooded, r := job("flooded")
	t.Logf("32 tasks: %v unflooded, %v flooded (ratio %.2f)", calm.Round(time.Millisecond), flooded.Round(time.Millisecond), float64(flooded)/float64(calm))
	if r.code != 0 {
		t.Fatalf("flooded job: exit %d after %v\n%s", r.code, flooded, r.stderr)
	}
	if flooded > 2*calm {
		t.Fatalf("flooded job took %v, more than twice its unflooded %v", flooded, calm)
	}
}
