package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/transfer"
)

// resolveTimeout bounds one Info call to a static peer.
const resolveTimeout = 2 * time.Second

// ResolveStatic is the discovery.ResolveFunc of p2pc peers: it asks the
// node at a static gRPC address (--join) for its name and gossip address
// with the Info call. A node that has no gossip address yet (its presence
// is still starting) counts as not answering.
func ResolveStatic(conns *transfer.Pool) discovery.ResolveFunc {
	return func(ctx context.Context, addr string) (discovery.Peer, error) {
		ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		defer cancel()
		// gRPC's resolver hides why a name does not resolve: ask first.
		if host, _, err := net.SplitHostPort(addr); err == nil && net.ParseIP(host) == nil {
			if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
				return discovery.Peer{}, fmt.Errorf("the name %s does not resolve: %w", host, err)
			}
		}
		conn, err := conns.Conn(addr)
		if err != nil {
			return discovery.Peer{}, err
		}
		info, err := peerpb.NewPeerClient(conn).Info(ctx, &peerpb.InfoRequest{Proto: ProtocolVersion})
		if err != nil {
			return discovery.Peer{}, plain.Error(err)
		}
		if info.GossipAddr == "" {
			return discovery.Peer{}, errors.New("no gossip address yet")
		}
		return discovery.Peer{Name: info.Name, Addr: addr, GossipAddr: info.GossipAddr, Version: int(info.Proto)}, nil
	}
}
