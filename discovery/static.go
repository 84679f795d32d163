package discovery

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
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

// ParseAddrs parses a comma-separated list of host:port addresses (as
// given to --join), rejecting malformed ones with their position.
func ParseAddrs(list string) (Static, error) {
	var out Static
	seen := map[string]bool{}
	for i, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("peer address %d %q: %w", i+1, a, err)
		}
		if host == "" {
			return nil, fmt.Errorf("peer address %d %q: missing host", i+1, a)
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
