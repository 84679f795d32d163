//go:build !p2pcfault

package node

import (
	"context"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
)

// Lie is empty in a build without the p2pcfault tag: the release cannot
// inject faults (lie.go holds them, for the test harness's builds).
type Lie struct{}

func (n *Node) malform(*peerpb.Result) {}

func (n *Node) forgeries(*peerpb.Result) []*peerpb.FromPeer { return nil }

func (n *Node) tamper(*peerpb.Lease) func(stage string) error { return nil }

func (n *Node) startGhost(context.Context, *discovery.Membership, string, string) (func(), error) {
	return func() {}, nil
}
