package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{in: nil, want: nil},
		{in: []string{""}, want: nil},
		{in: []string{"127.0.0.1:7000"}, want: []string{"127.0.0.1:7000"}},
		{in: []string{" a:1 ", " b:2", "a:1 "}, want: []string{"a:1", "b:2"}},
		{in: []string{"[::1]:9"}, want: []string{"[::1]:9"}},
		{in: []string{"127.0.0.1"}, want: []string{"127.0.0.1:7070"}},
		{in: []string{"host-a", "host-a:7070"}, want: []string{"host-a:7070"}},
		{in: []string{"[::1]", "::1"}, want: []string{"[::1]:7070"}},
		{in: []string{"a:"}, wantErr: "peer address 1"},
		{in: []string{"[a]"}, wantErr: "peer address 1"},
		{in: []string{"a:1", "b:0"}, wantErr: `peer address 2 "b:0": port must be 1-65535`},
		{in: []string{":80"}, wantErr: "missing host"},
		{in: []string{"a:http"}, wantErr: "port must be"},
		{in: []string{"pi-4.lan.", "node_7:9", "[fe80::1%eth0]:9"}, want: []string{"pi-4.lan.:7070", "node_7:9", "[fe80::1%eth0]:9"}},
		{in: []string{"a:1", "not an address"}, wantErr: `peer address 2 "not an address": "not an address" is neither an IP address nor a host name (character 4 is ' ')`},
		{in: []string{"not an address:7070"}, wantErr: "neither an IP address nor a host name"},
		{in: []string{"a..b"}, wantErr: "empty label"},
		{in: []string{"host/x"}, wantErr: "character 5 is '/'"},
		{in: []string{"tcp://10.0.0.1:7000", "tcp://host-a"}, want: []string{"10.0.0.1:7000", "host-a:7070"}},
		{in: []string{"quic://10.0.0.1:7000"}, wantErr: `peer address 1 "quic://10.0.0.1:7000": transport "quic"`},
	}
	for _, tt := range tests {
		got, err := ParseAddrs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAddrs(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddrs(%q): %v", tt.in, err)
			continue
		}
		peers, _ := got.Find(context.Background())
		var addrs []string
		for _, p := range peers {
			addrs = append(addrs, p.Addr)
		}
		if !slices.Equal(addrs, tt.want) || !slices.Equal(got.Addrs(), addrs) {
			t.Errorf("ParseAddrs(%q) = %v, want %v", tt.in, addrs, tt.want)
		}
	}
}

func TestResolver(t *testing.T) {
	up := map[string]bool{"a:1": true}
	asked := map[string]int{}
	var mu sync.Mutex // Find asks at once
	r := &Resolver{
		Addrs: []string{"a:1", "b:2"},
		Resolve: func(_ context.Context, addr string) (Peer, error) {
			mu.Lock()
			defer mu.Unlock()
			asked[addr]++
			if !up[addr] {
				return Peer{}, errors.New("connection refused")
			}
			return Peer{Name: "node-" + addr[:1], GossipAddr: addr[:1] + ":7946"}, nil
		},
	}
	for _, c := range []struct {
		name    string
		up      string // comes up before this round
		want    []string
		err     string
		askedA  int
		askedB  int
		lookupB bool
	}{
		{name: "one answers", want: []string{"node-a a:1 a:7946"}, err: "peer b:2: connection refused", askedA: 1, askedB: 1},
		{name: "the silent one is asked again, the known one is not", want: []string{"node-a a:1 a:7946"}, err: "peer b:2", askedA: 1, askedB: 2},
		{name: "it comes up", up: "b:2", want: []string{"node-a a:1 a:7946", "node-b b:2 b:7946"}, askedA: 1, askedB: 3},
		{name: "both known: no call", want: []string{"node-a a:1 a:7946", "node-b b:2 b:7946"}, askedA: 1, askedB: 3, lookupB: true},
	} {
		if c.up != "" {
			up[c.up] = true
		}
		peers, err := r.Find(t.Context())
		var got []string
		for _, p := range peers {
			got = append(got, fmt.Sprintf("%s %s %s", p.Name, p.Addr, p.GossipAddr))
		}
		if !slices.Equal(got, c.want) || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: Find = %v, %v; want %v, %q", c.name, got, err, c.want, c.err)
		}
		if c.lookupB {
			if p, err := r.Lookup(t.Context(), "b:2"); err != nil || p.Name != "node-b" {
				t.Errorf("%s: Lookup = %+v, %v", c.name, p, err)
			}
		}
		if asked["a:1"] != c.askedA || asked["b:2"] != c.askedB {
			t.Errorf("%s: asked %v, want a %d, b %d", c.name, asked, c.askedA, c.askedB)
		}
	}
}

// TestResolverAsksAtOnce: Find asks the static addresses at once, not one
// after the other (each ask is a handshake and a round trip: a hundred
// static peers asked in turn took seconds to enrol). Each Resolve here
// answers only once every address is being asked.
func TestResolverAsksAtOnce(t *testing.T) {
	const n = 40
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("10.0.0.%d:7070", i+1))
	}
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	r := &Resolver{Addrs: addrs, Resolve: func(ctx context.Context, addr string) (Peer, error) {
		arrived.Done()
		select {
		case <-all:
			return Peer{Name: "node-" + addr, GossipAddr: addr}, nil
		case <-ctx.Done():
			return Peer{}, ctx.Err()
		}
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	peers, err := r.Find(ctx)
	if err != nil || len(peers) != n {
		t.Fatalf("Find = %d peers, %v; want %d peers asked at once", len(peers), err, n)
	}
	for i, p := range peers {
		if p.Addr != addrs[i] {
			t.Fatalf("peer %d is %s, want %s (the order of Addrs)", i, p.Addr, addrs[i])
		}
	}
}
