package job

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestLeaseGateStalls: the successors lacking a committed pass for
// leaseStall stalls the leasing; a snapshot that catches up ends it, and
// one that catches up only partly starts the stall over from its time.
func TestLeaseGateStalls(t *testing.T) {
	var d durability
	d.replicas = true
	t0 := time.Now()
	if _, s := d.stalled(t0.Add(time.Hour)); s {
		t.Error("stalled with nothing committed")
	}
	d.reached(1)
	if _, s := d.stalled(time.Now()); s {
		t.Error("stalled at once after a commit")
	}
	if _, s := d.stalled(time.Now().Add(leaseStall)); !s {
		t.Errorf("not stalled %s after a commit the successors lack", leaseStall)
	}
	d.replicatedTo(1)
	if _, s := d.stalled(time.Now().Add(time.Hour)); s {
		t.Error("stalled with the successors holding every pass")
	}
	d.reached(2)
	snapped := time.Now().Add(time.Millisecond)
	d.reached(3)
	d.replicatedAt(2, snapped)
	since, s := d.stalled(snapped.Add(leaseStall - time.Millisecond))
	if s || !since.Equal(snapped) {
		t.Errorf("after a partial catch-up: stalled %v since %v, want not yet, since the snapshot (%v)", s, since, snapped)
	}
	if _, s := d.stalled(snapped.Add(leaseStall)); !s {
		t.Error("not stalled a leaseStall after the snapshot that left pass 3 behind")
	}

	var none durability // no successors: a plain `p2pc run`
	none.reached(5)
	if _, s := none.stalled(time.Now().Add(time.Hour)); s {
		t.Error("a run without successors stalled")
	}
}

// TestLeasableWaitsForCopies: leasable returns at once while the journal
// reaches the successors, waits while it has not for leaseStall, and
// returns once a copy catches up (or with an error when ctx ends).
func TestLeasableWaitsForCopies(t *testing.T) {
	r := &runner{log: slog.New(slog.DiscardHandler)}
	r.durable.replicas = true
	ctx := context.Background()
	if err := r.leasable(ctx); err != nil {
		t.Fatal(err)
	}
	r.durable.reached(1)
	r.durable.lag.since.Store(time.Now().Add(-2 * leaseStall).UnixNano())
	done := make(chan error, 1)
	go func() { done <- r.leasable(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("leasable returned (%v) while the successors lacked a pass for %s", err, 2*leaseStall)
	case <-time.After(100 * time.Millisecond):
	}
	r.durable.replicatedTo(1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("leasable still waits after the successors caught up")
	}
	r.durable.reached(2)
	r.durable.lag.since.Store(time.Now().Add(-2 * leaseStall).UnixNano())
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.leasable(cctx); err == nil {
		t.Error("leasable returned nil for an ended context while stalled")
	}
}
