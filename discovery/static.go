package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/p2pc/p2pc/internal/transport"
)

// Peer is a node that can be contacted.
type Peer struct {
	// Name is the node's name, if known.
	Name string
	// Addr is the node's gRPC address, host:port.
	Addr string
	// GossipAddr is the node's memberlist address, host:port, if known
	// (mDNS announces it; --join addresses are gossip addresses too, see
	// Membership.JoinFrom).
	GossipAddr string
	// Version is the peer protocol version the node speaks, 0 if unknown.
	Version int
}

// Finder returns the peers it currently knows of.
type Finder interface {
	Find(ctx context.Context) ([]Peer, error)
}

// Static is a fixed list of peers.
type Static []Peer

// Find returns the list.
func (s Static) Find(context.Context) ([]Peer, error) { return append([]Peer(nil), s...), nil }

// DefaultPort is the port `p2pc join` listens on unless told otherwise,
// and the port a --join address without one means.
const DefaultPort = 7070

// ParseAddrs parses host:port addresses (as given to --join, which kong
// splits at commas), rejecting malformed ones with their position and
// dropping empty ones and repeats. A bare host (a name or an IP address,
// IPv6 in brackets) means its DefaultPort. A "tcp://" scheme is allowed
// and dropped; another scheme is refused.
func ParseAddrs(addrs []string) (Static, error) {
	var out Static
	seen := map[string]bool{}
	for i, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		scheme, rest := transport.Split(a)
		if scheme != transport.DefaultScheme {
			return nil, fmt.Errorf("peer address %d %q: transport %q: a static peer is a tcp address", i+1, a, scheme)
		}
		a = rest
		host, port, err := net.SplitHostPort(a)
		if err != nil && bareHost(a) {
			host, port, err = strings.Trim(a, "[]"), strconv.Itoa(DefaultPort), nil
		}
		if err != nil {
			return nil, fmt.Errorf("peer address %d %q: %w", i+1, a, err)
		}
		if host == "" {
			return nil, fmt.Errorf("peer address %d %q: missing host", i+1, a)
		}
		if err := checkHost(host); err != nil {
			return nil, fmt.Errorf("peer address %d %q: %w", i+1, a, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("peer address %d %q: port must be 1-65535", i+1, a)
		}
		norm := net.JoinHostPort(host, port)
		if seen[norm] {
			continue
		}
		seen[norm] = true
		out = append(out, Peer{Addr: norm})
	}
	return out, nil
}

// checkHost says why host is neither an IP address (IPv6 with or without
// a zone) nor a syntactically valid host name: labels of letters, digits,
// '-' and '_', 1-63 characters each, 253 in all, an optional final dot.
// Whether a name resolves is not its concern: a name may resolve later.
func checkHost(host string) error {
	ip, _, _ := strings.Cut(host, "%")
	if net.ParseIP(ip) != nil {
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	if len(name) > 253 {
		return fmt.Errorf("host name of %d characters, at most 253", len(name))
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q is neither an IP address nor a host name (character %d is %q)", host, i+1, r)
		}
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a host name (an empty label, or one over 63 characters)", host)
		}
	}
	return nil
}

// bareHost reports whether a is a host without a port: a name, an IPv4
// address, or an IPv6 address (bare or in brackets).
func bareHost(a string) bool {
	if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		return net.ParseIP(a[1:len(a)-1]) != nil
	}
	if net.ParseIP(a) != nil {
		return true
	}
	return !strings.ContainsAny(a, ":[]")
}

// Addrs returns the peers' addresses.
func (s Static) Addrs() []string {
	out := make([]string, len(s))
	for i, p := range s {
		out[i] = p.Addr
	}
	return out
}

// ResolveFunc asks the node at a static address (gRPC, host:port) who it
// is: its name and gossip address.
type ResolveFunc func(ctx context.Context, addr string) (Peer, error)

// Resolver is the one way static addresses (--join) become peers: it
// asks each address who it is through Resolve and keeps the answers, so
// an address is asked until it answers once. It is a Finder: given to
// Membership.JoinFrom it joins static peers as they come up. Find calls
// Resolve from several goroutines at once.
type Resolver struct {
	Addrs   []string
	Resolve ResolveFunc
	// Answered, if set, is called each time an address answers for the
	// first time (from the goroutine that asked it).
	Answered func()

	mu    sync.Mutex
	known map[string]Peer
}

// resolveAtOnce bounds the addresses Find asks at once. Each ask is a
// TLS handshake and a round trip: asked one after the other, a hundred
// static peers took seconds before the first of them was enrolled.
const resolveAtOnce = 64

// Find resolves the addresses that have not answered yet, up to
// resolveAtOnce at a time, and returns the peers of those that have, in
// the order of Addrs; the error names the addresses that did not answer
// this time.
func (r *Resolver) Find(ctx context.Context) ([]Peer, error) {
	peers := make([]Peer, len(r.Addrs))
	errs := make([]error, len(r.Addrs))
	sem := make(chan struct{}, resolveAtOnce)
	var wg sync.WaitGroup
	for i, a := range r.Addrs {
		if p, ok := r.cached(a); ok {
			peers[i] = p
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			peers[i], errs[i] = r.Lookup(ctx, a)
		}()
	}
	wg.Wait()
	var out []Peer
	for i := range peers {
		if errs[i] == nil {
			out = append(out, peers[i])
		}
	}
	return out, errors.Join(errs...)
}

// cached returns the answer kept for addr, if any.
func (r *Resolver) cached(addr string) (Peer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.known[addr]
	return p, ok
}

// Lookup resolves one address, once: a later call returns the first
// answer.
func (r *Resolver) Lookup(ctx context.Context, addr string) (Peer, error) {
	if p, ok := r.cached(addr); ok {
		return p, nil
	}
	p, err := r.Resolve(ctx, addr)
	if err != nil {
		return Peer{}, fmt.Errorf("peer %s: %w", addr, err)
	}
	if p.Addr == "" {
		p.Addr = addr
	}
	r.mu.Lock()
	if r.known == nil {
		r.known = map[string]Peer{}
	}
	_, again := r.known[addr]
	r.known[addr] = p
	r.mu.Unlock()
	if !again && r.Answered != nil {
		r.Answered()
	}
	return p, nil
}

// Known returns the peers of the addresses that have answered, in the
// order of Addrs, without asking anyone.
func (r *Resolver) Known() []Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Peer
	for _, a := range r.Addrs {
		if p, ok := r.known[a]; ok {
			out = append(out, p)
		}
	}
	return out
}

// Forget drops the answer of the peer at addr (its gRPC address or its
// gossip address), so that it is asked again: a static peer restarted
// gossips on a new port. JoinFrom calls it when joining a found peer did
// not make it a member.
func (r *Resolver) Forget(p Peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, k := range r.known {
		if a == p.Addr || k.Addr == p.Addr || (p.GossipAddr != "" && k.GossipAddr == p.GossipAddr) {
			delete(r.known, a)
		}
	}
}
