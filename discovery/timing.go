package discovery

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing holds memberlist's failure detection and gossip knobs. A zero
// field takes its value from LANTiming. docs/design/discovery.md says
// what the figures give in practice.
type Timing struct {
	// ProbeInterval is how often each member probes one other member;
	// ProbeTimeout how long it waits for the direct ack before asking
	// IndirectChecks others to probe for it.
	ProbeInterval  time.Duration
	ProbeTimeout   time.Duration
	IndirectChecks int
	// A member that fails a probe is suspect for
	// SuspicionMult * max(1, log10(N)) * ProbeInterval, up to
	// SuspicionMaxTimeoutMult times that while too few others confirm,
	// then dead.
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	// GossipInterval and GossipNodes: how often, and to how many members,
	// queued broadcasts (joins, metadata updates, deaths) are sent.
	GossipInterval time.Duration
	GossipNodes    int
	// RetransmitMult * log(N+1) is how many times a broadcast is sent.
	RetransmitMult int
	// PushPullInterval is the period of full state exchanges with one
	// random member (anti-entropy).
	PushPullInterval time.Duration
	// TCPTimeout bounds connecting and each stream operation (joins,
	// push/pull, TCP fallback probes).
	TCPTimeout time.Duration
	// GossipToTheDeadTime is how long dead members are still gossiped to
	// (so they can refute) and remembered.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime lets a member that died come back under the same
	// name at another address after this long (a restarted peer with a new
	// ephemeral port).
	DeadNodeReclaimTime time.Duration
}

// LANTiming is tuned for a LAN of spare machines: a member that goes
// silent is declared dead in about 2-3 s (results/notes-from-code.md),
// at the cost of one small UDP probe per member every 500 ms.
func LANTiming() Timing {
	return Timing{
		ProbeInterval:           500 * time.Millisecond,
		ProbeTimeout:            250 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: 3,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          4,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              3 * time.Second,
		GossipToTheDeadTime:     15 * time.Second,
		DeadNodeReclaimTime:     5 * time.Second,
	}
}

// SubmitterTiming is LANTiming for a member that only submits (`p2pc
// run`): it gossips every 10 ms instead of every 100 ms, so its leave
// message goes out within 10 ms of its results being on disk (Leave waits
// one gossip round) and its own updates spread sooner. A round with
// nothing queued costs a few microseconds; a run is short.
func SubmitterTiming() Timing {
	t := LANTiming()
	t.GossipInterval = 10 * time.Millisecond
	return t
}

// LoopbackTiming is for members on one machine (tests, benchmarks): faster
// probes and gossip, death in about a second.
func LoopbackTiming() Timing {
	return Timing{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		IndirectChecks:          2,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          50 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          4,
		PushPullInterval:        5 * time.Second,
		TCPTimeout:              time.Second,
		GossipToTheDeadTime:     5 * time.Second,
		DeadNodeReclaimTime:     2 * time.Second,
	}
}

// withDefaults fills the zero fields of t from LANTiming.
func (t Timing) withDefaults() Timing {
	d := LANTiming()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur(&t.ProbeInterval, d.ProbeInterval)
	setDur(&t.ProbeTimeout, d.ProbeTimeout)
	setInt(&t.IndirectChecks, d.IndirectChecks)
	setInt(&t.SuspicionMult, d.SuspicionMult)
	setInt(&t.SuspicionMaxTimeoutMult, d.SuspicionMaxTimeoutMult)
	setDur(&t.GossipInterval, d.GossipInterval)
	setInt(&t.GossipNodes, d.GossipNodes)
	setInt(&t.RetransmitMult, d.RetransmitMult)
	setDur(&t.PushPullInterval, d.PushPullInterval)
	setDur(&t.TCPTimeout, d.TCPTimeout)
	setDur(&t.GossipToTheDeadTime, d.GossipToTheDeadTime)
	setDur(&t.DeadNodeReclaimTime, d.DeadNodeReclaimTime)
	return t
}

// apply copies t into a memberlist configuration.
func (t Timing) apply(c *memberlist.Config) {
	c.ProbeInterval = t.ProbeInterval
	c.ProbeTimeout = t.ProbeTimeout
	c.IndirectChecks = t.IndirectChecks
	c.SuspicionMult = t.SuspicionMult
	c.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	c.GossipInterval = t.GossipInterval
	c.GossipNodes = t.GossipNodes
	c.RetransmitMult = t.RetransmitMult
	c.PushPullInterval = t.PushPullInterval
	c.TCPTimeout = t.TCPTimeout
	c.GossipToTheDeadTime = t.GossipToTheDeadTime
	c.DeadNodeReclaimTime = t.DeadNodeReclaimTime
}
