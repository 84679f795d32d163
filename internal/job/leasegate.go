package job

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// The lease gate: an owner cut off from its successors stops handing out
// work (RunOptions.Replicate).
//
// Ownership of a job handed to the swarm lasts as long as the owner's
// journal reaches its successors: once it does not, the other side of a
// partition may take the job over, and every task this owner leases from
// then on is one the new owner runs again. So while the oldest committed
// pass the successors lack is older than leaseStall, the coordinator
// leases nothing new; leases already out run to their end (their results
// are kept unacknowledged by their peers). The work a partition
// duplicates is then what was in flight on the owner's side at the cut
// plus what it leased within leaseStall, not everything that side ran
// meanwhile. Replication that is only slow pauses leasing too, until it
// catches up: results beyond the journal's reach could not be
// acknowledged anyway.

// leaseStall is how long the successors may lack a committed pass before
// the coordinator stops leasing: well above a snapshot's round (about
// replicaEvery), below the 2-3 s gossip takes to declare a member dead.
const leaseStall = time.Second

// behind notes when the successors began to lack a committed pass (0:
// they hold every one); see durability.
type behind struct{ since atomic.Int64 }

// committedPast notes that pass p is committed while the successors hold
// only replicated.
func (b *behind) committedPast(p, replicated uint64) {
	if p > replicated {
		b.since.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// caughtUp notes that the successors hold pass p, from a snapshot taken
// at snapped: what they lack now (committed holds the last committed
// pass) was committed after it.
func (b *behind) caughtUp(p uint64, committed *atomic.Uint64, snapped time.Time) {
	if p < committed.Load() {
		b.since.Store(snapped.UnixNano())
		return
	}
	b.since.Store(0)
	if p < committed.Load() { // a pass committed meanwhile
		b.since.CompareAndSwap(0, snapped.UnixNano())
	}
}

// replicatedAt notes that the successors hold pass p, from a snapshot
// taken at snapped (replicatedTo: taken now, which may date a lag later
// than it began, by one snapshot's round at most).
func (d *durability) replicatedAt(p uint64, snapped time.Time) {
	if p <= d.replicated.Load() {
		return
	}
	d.lag.caughtUp(p, &d.committed, snapped)
	d.replicated.Store(p)
	d.wake()
}

// stalled reports whether the successors have lacked a committed pass
// for leaseStall or more, and since when.
func (d *durability) stalled(now time.Time) (time.Time, bool) {
	if !d.replicas {
		return time.Time{}, false
	}
	s := d.lag.since.Load()
	if s == 0 || d.replicated.Load() >= d.committed.Load() {
		return time.Time{}, false
	}
	at := time.Unix(0, s)
	return at, now.Sub(at) >= leaseStall
}

// leasable waits until the coordinator may lease: at once unless the
// journal has not reached the job's successors for leaseStall (above);
// then until it does, or ctx ends. The first worker to wait says so in
// the log, and the first to go on says that.
func (r *runner) leasable(ctx context.Context) error {
	d := &r.durable
	if !d.replicas {
		return nil
	}
	for {
		moved := d.watch()
		since, stalled := d.stalled(time.Now())
		if !stalled {
			if r.stallSaid.Swap(0) != 0 {
				r.log.Info("the journal is on the job's successors again: leasing again")
			}
			return nil
		}
		if r.stallSaid.Swap(since.UnixNano()) != since.UnixNano() {
			r.log.Warn("the journal has not reached the job's successors: no new leases until it does (another member may own the job by now)",
				"behind", time.Since(since).Round(time.Millisecond))
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("wait for the journal to reach the job's successors: %w", ctx.Err())
		}
	}
}
