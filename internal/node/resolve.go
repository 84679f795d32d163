package node

import (
	"context"
	"errors"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
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
		conn, err := conns.Conn(addr)
		if err != nil {
			return discovery.Peer{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		defer cancel()
		info, err := peerpb.NewPeerClient(conn).Info(ctx, &peerpb.InfoRequest{Proto: ProtocolVersion})
		if err != nil {
			return discovery.Peer{}, err
		}
		if info.GossipAddr == "" {
			return discovery.Peer{}, errors.New("no gossip address yet")
		}
		return discovery.Peer{Name: info.Name, Addr: addr, GossipAddr: info.GossipAddr, Version: int(info.Proto)}, nil
	}
}
