package discovery_test

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/testwait"
)

// Every test here multicasts: it runs only inside the private network
// namespace TestMain makes.

func announce(t *testing.T, a discovery.Announcement) *discovery.MDNS {
	t.Helper()
	m, err := discovery.NewMDNS(discovery.MDNSConfig{Self: &a, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func browser(t *testing.T, ttl time.Duration) *discovery.MDNS {
	t.Helper()
	m, err := discovery.NewMDNS(discovery.MDNSConfig{QueryTimeout: 200 * time.Millisecond, TTL: ttl, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// findUntil runs Find until cond holds on its result.
func findUntil(t *testing.T, b *discovery.MDNS, timeout time.Duration, what string, cond func([]discovery.Peer) bool) []discovery.Peer {
	t.Helper()
	start := time.Now()
	for {
		peers, err := b.Find(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cond(peers) {
			return peers
		}
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting until %s; last found %+v", timeout, what, peers)
		}
	}
}

func TestMDNSFindsAnnouncers(t *testing.T) {
	harness.RequirePrivateNetns(t)
	announce(t, discovery.Announcement{Name: "alpha", GRPCAddr: "127.0.0.1:7001", GossipAddr: "127.0.0.1:7946", Version: 1})
	announce(t, discovery.Announcement{Name: "beta.local", GRPCAddr: "0.0.0.0:7002", GossipAddr: "0.0.0.0:7947", Version: 2})
	b := browser(t, 10*time.Second)
	peers := findUntil(t, b, 5*time.Second, "both announcers found", func(p []discovery.Peer) bool { return len(p) >= 2 })
	want := []discovery.Peer{
		{Name: "alpha", Addr: "127.0.0.1:7001", GossipAddr: "127.0.0.1:7946", Version: 1},
		{Name: "beta.local", Addr: "127.0.0.1:7002", GossipAddr: "127.0.0.1:7947", Version: 2},
	}
	if !slices.Equal(peers, want) {
		t.Fatalf("found %+v\nwant  %+v", peers, want)
	}
}

func TestMDNSSelfExcluded(t *testing.T) {
	harness.RequirePrivateNetns(t)
	a := announce(t, discovery.Announcement{Name: "self", GRPCAddr: "127.0.0.1:7001", Version: 1})
	announce(t, discovery.Announcement{Name: "other", GRPCAddr: "127.0.0.1:7002", Version: 1})
	peers := findUntil(t, a, 5*time.Second, "other found", func(p []discovery.Peer) bool { return len(p) > 0 })
	if len(peers) != 1 || peers[0].Name != "other" {
		t.Fatalf("found %+v, want only other", peers)
	}
}

func TestMDNSExpiry(t *testing.T) {
	harness.RequirePrivateNetns(t)
	announce(t, discovery.Announcement{Name: "stays", GRPCAddr: "127.0.0.1:7001", Version: 1})
	gone := announce(t, discovery.Announcement{Name: "goes", GRPCAddr: "127.0.0.1:7002", Version: 1})
	ttl := time.Second
	b := browser(t, ttl)
	findUntil(t, b, 5*time.Second, "both found", func(p []discovery.Peer) bool { return len(p) == 2 })
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if peers, err := b.Find(context.Background()); err != nil || len(peers) != 2 {
		t.Errorf("right after the announcer stopped, Find = %+v, %v; want both still cached", peers, err)
	}
	peers := findUntil(t, b, 5*time.Second, "goes forgotten", func(p []discovery.Peer) bool { return len(p) == 1 })
	took := time.Since(stopped)
	t.Logf("stopped announcer forgotten after %s (TTL %s)", took, ttl)
	if peers[0].Name != "stays" {
		t.Errorf("left with %+v", peers)
	}
}

func TestMDNSBrowse(t *testing.T) {
	harness.RequirePrivateNetns(t)
	announce(t, discovery.Announcement{Name: "a1", GRPCAddr: "127.0.0.1:7001", GossipAddr: "127.0.0.1:7101", Version: 1})
	announce(t, discovery.Announcement{Name: "a2", GRPCAddr: "127.0.0.1:7002", GossipAddr: "127.0.0.1:7102", Version: 1})
	b := browser(t, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var found []string
	returned := false
	done := make(chan error, 1)
	go func() {
		done <- b.Browse(ctx, 100*time.Millisecond, func(p discovery.Peer) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				t.Errorf("found(%s) called after Browse returned", p.Name)
			}
			found = append(found, p.Name)
		})
	}()
	testwait.For(t, 5*time.Second, "both browsed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(found) >= 2
	})
	time.Sleep(500 * time.Millisecond) // more rounds: no repeats
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Browse: %v", err)
	}
	mu.Lock()
	returned = true
	slices.Sort(found)
	if !slices.Equal(found, []string{"a1", "a2"}) {
		t.Errorf("found called for %v, want a1 and a2 once each", found)
	}
	mu.Unlock()
}

func TestMDNSCloseEndsEverything(t *testing.T) {
	harness.RequirePrivateNetns(t)
	waitNoGoroutines(t, "before")
	a, err := discovery.NewMDNS(discovery.MDNSConfig{Self: &discovery.Announcement{Name: "a", GRPCAddr: "127.0.0.1:7001"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := discovery.NewMDNS(discovery.MDNSConfig{QueryTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	findUntil(t, b, 5*time.Second, "a found", func(p []discovery.Peer) bool { return len(p) == 1 })
	done := make(chan error, 1)
	go func() { done <- b.Browse(context.Background(), 50*time.Millisecond, func(discovery.Peer) {}) }()
	time.Sleep(100 * time.Millisecond)
	for _, m := range []*discovery.MDNS{a, b} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Browse after Close: %v", err)
	}
	if _, err := b.Find(context.Background()); err == nil {
		t.Error("Find after Close succeeded")
	}
	waitNoGoroutines(t, "after Close")
}

// TestMDNSMembershipProcesses starts three member processes with no
// address of each other: they find each other through mDNS alone and end
// up in one memberlist cluster.
func TestMDNSMembershipProcesses(t *testing.T) {
	harness.RequirePrivateNetns(t)
	var procs []*harness.Proc
	for _, name := range []string{"m1", "m2", "m3"} {
		p, _ := startMemberProc(t, name, memberMDNSEnv+"=1")
		procs = append(procs, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	for _, p := range procs {
		if _, err := p.WaitOutput(ctx, regexp.MustCompile(`members=m1,m2,m3\n`)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("3 processes found each other through mDNS and joined in %s", time.Since(start))
}
