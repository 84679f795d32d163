//go:build p2pcfault

package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
)

// Lie is fault injection for the tests of answer verification: a node
// configured with it corrupts task outputs. It exists only in builds with
// the p2pcfault tag (the test harness's; the release has an empty Lie, see
// nolie.go); there it is a hidden `p2pc join` flag, and the node logs an
// error at start and at every lie.
type Lie struct {
	// Rate is the probability that an output is corrupted (1: always).
	Rate float64
	// Collude: every colluding node corrupts an output the same way, so
	// their wrong digests agree. Otherwise each liar's corruption carries
	// its name.
	Collude bool
	// Malformed: every successful result is sent with a digest that does
	// not match its files (the tests of fault charging).
	Malformed bool
	// Ghost: the node also gossips a made-up member of this name whose
	// gRPC address is its own (the tests of one node, one vote), claiming
	// GhostID as its node ID ("": this node's own).
	Ghost, GhostID string
	// Forge: with every result, the node sends this many results for
	// leases it never held (the tests of forged results).
	Forge int
}

// malform spoils a successful result's digest when the node is told to.
func (n *Node) malform(res *peerpb.Result) {
	if !n.cfg.Lie.Malformed || res.Outcome != report.OutcomeOK || len(res.Digest) == 0 {
		return
	}
	res.Digest = append([]byte(nil), res.Digest...)
	res.Digest[0] ^= 0xff
	n.log.Error("FAULT INJECTION: sending a malformed result", "lease", res.LeaseId)
}

// forgeries are the results for leases never held that the node sends
// with res when told to: their lease IDs are far above any it holds.
func (n *Node) forgeries(res *peerpb.Result) []*peerpb.FromPeer {
	k := n.cfg.Lie.Forge
	if k <= 0 {
		return nil
	}
	out := make([]*peerpb.FromPeer, k)
	for i := range out {
		f := &peerpb.Result{LeaseId: res.LeaseId + 1<<40 + uint64(i), Outcome: report.OutcomeOK, Digest: res.Digest, Outputs: res.Outputs}
		out[i] = &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: f}}
	}
	n.log.Error("FAULT INJECTION: sending results for leases never held", "count", k, "beside", res.LeaseId)
	return out
}

// tamper returns the hook that corrupts lease l's staged output, or nil
// when the node does not lie.
func (n *Node) tamper(l *peerpb.Lease) func(stage string) error {
	if n.cfg.Lie.Rate <= 0 {
		return nil
	}
	return func(stage string) error { return n.lie(stage, l) }
}

// lie corrupts the staged output in dir with the configured probability.
// The choice is a pure function of the node's name (or, colluding, of
// nothing) and the task, so colluders lie about the same tasks.
func (n *Node) lie(dir string, l *peerpb.Lease) error {
	cfg := n.cfg.Lie
	who := n.cfg.Name
	if cfg.Collude {
		who = "collude"
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%s", who, l.TaskId, l.Params)
	if cfg.Rate < 1 && rand.New(rand.NewPCG(h.Sum64(), 1)).Float64() >= cfg.Rate {
		return nil
	}
	var names []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			names = append(names, path)
		}
		return nil
	})
	sort.Strings(names)
	target := filepath.Join(dir, "data")
	if len(names) > 0 {
		target = names[0]
	}
	old, _ := os.ReadFile(target)
	sum := sha256.Sum256(append(old, who...))
	if err := os.WriteFile(target, append(old, fmt.Sprintf("\nLIE %x\n", sum[:8])...), 0o644); err != nil {
		return fmt.Errorf("lie: %w", err)
	}
	n.log.Error("FAULT INJECTION: returning a corrupted output", "task", l.TaskId, "collude", cfg.Collude)
	return nil
}

// startGhost gossips the made-up member Lie.Ghost beside the node's own
// membership mem (bound to bind, advertised at host): a second gossip
// endpoint whose metadata names the node's own gRPC address. It returns
// the function that stops it.
func (n *Node) startGhost(ctx context.Context, mem *discovery.Membership, bind, host string) (func(), error) {
	cfg := n.cfg.Lie
	if cfg.Ghost == "" {
		return func() {}, nil
	}
	ghost, err := discovery.Start(ctx, discovery.Config{
		Name:          cfg.Ghost,
		BindAddr:      bind,
		AdvertiseAddr: host,
		Meta: func() discovery.Meta {
			m := n.meta()
			m.Name = cfg.Ghost
			if cfg.GhostID != "" {
				m.ID = cfg.GhostID
			}
			return m
		},
		Logger:    n.cfg.Logger,
		SecretKey: n.cfg.Creds.GossipKey(),
	})
	if err != nil {
		return nil, fmt.Errorf("ghost: %w", err)
	}
	if _, err := ghost.Join(ctx, []string{mem.GossipAddr()}); err != nil {
		ghost.Close()
		return nil, fmt.Errorf("ghost: %w", err)
	}
	n.log.Error("FAULT INJECTION: gossiping a made-up member at this node's address", "ghost", cfg.Ghost, "id", cfg.GhostID)
	return func() {
		ghost.Leave(time.Second)
		ghost.Close()
	}, nil
}
