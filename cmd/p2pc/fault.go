//go:build p2pcfault

package main

import (
	"log/slog"

	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/transfer"
)

// joinFaults are `p2pc join`'s fault-injection flags, for the tests of
// answer verification and fault charging. Hidden, and loudly logged:
// never set them on a real swarm.
type joinFaults struct {
	LieRate    float64 `name:"fault-lie-rate" hidden:"" help:"TESTS ONLY: corrupt this fraction of outputs."`
	LieCollude bool    `name:"fault-lie-collude" hidden:"" help:"TESTS ONLY: corrupt outputs the same way as other colluding liars."`
	Malformed  bool    `name:"fault-malformed" hidden:"" help:"TESTS ONLY: send every result with a digest that does not match its files."`
	Ghost      string  `name:"fault-ghost" hidden:"" help:"TESTS ONLY: also gossip a made-up member of this name at this node's address."`
	GhostID    string  `name:"fault-ghost-id" hidden:"" help:"TESTS ONLY: the node ID the made-up member claims (default: this node's own)."`
	Forge      int     `name:"fault-forge" hidden:"" help:"TESTS ONLY: with every result, send this many results for leases never held."`
}

// lie is the node's fault configuration.
func (f joinFaults) lie() node.Lie {
	return node.Lie{Rate: f.LieRate, Collude: f.LieCollude, Malformed: f.Malformed, Ghost: f.Ghost, GhostID: f.GhostID, Forge: f.Forge}
}

// announce logs an error for every fault switched on.
func (f joinFaults) announce(log *slog.Logger) {
	if f.Malformed {
		log.Error("FAULT INJECTION ON: this node sends malformed results; for tests of fault charging only")
	}
	if f.Forge > 0 {
		log.Error("FAULT INJECTION ON: this node sends results for leases it never held; for tests of fault charging only", "forge", f.Forge)
	}
	if f.Ghost != "" {
		log.Error("FAULT INJECTION ON: this node gossips a made-up member at its own address; for tests of one node, one vote only", "ghost", f.Ghost, "id", f.GhostID)
	}
	if f.LieRate > 0 {
		log.Error("FAULT INJECTION ON: this node corrupts task outputs; for tests of answer verification only", "rate", f.LieRate, "collude", f.LieCollude)
	}
}

// serveFaults are `p2pc blocks serve`'s fault-injection flags, for the
// tests of block verification.
type serveFaults struct {
	FaultCorrupt    bool `hidden:"" help:"TESTS ONLY: flip bytes of every block served."`
	FaultTruncate   bool `hidden:"" help:"TESTS ONLY: serve only half of every block."`
	FaultStallAfter int  `hidden:"" help:"TESTS ONLY: stop answering after serving N blocks."`
}

// apply sets the faults in o, and logs a warning if any is on.
func (f serveFaults) apply(o *transfer.ServerOptions, log *slog.Logger) {
	if f.FaultCorrupt || f.FaultTruncate || f.FaultStallAfter > 0 {
		log.Warn("FAULT INJECTION FLAGS SET: this node serves bad data on purpose; never use outside tests",
			"corrupt", f.FaultCorrupt, "truncate", f.FaultTruncate, "stall_after", f.FaultStallAfter)
	}
	o.Corrupt, o.Truncate, o.StallAfter = f.FaultCorrupt, f.FaultTruncate, f.FaultStallAfter
}
