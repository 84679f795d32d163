package job

import (
	"context"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
)

// TestPullsNeverHoldUpResults: while the leaser waits in Next (every
// task is leased; only a result can free one), the peer's pulls pile up.
// The receive loop must still pass the result that ends the wait: once
// it waited on the leaser to take a pull, and the leaser on that result,
// until the task's timeout (a 65,536-task run stalled 69 s on it).
func TestPullsNeverHoldUpResults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _ := testRunner(t, 1)
	q := newQueue(r, []int{0}, false)
	defer q.Close()
	l, err := q.Next(ctx, "p1@X")
	if err != nil {
		t.Fatal(err)
	}
	w := &remoteWorker{s: &Session{r: r, q: q, workRoot: r.workRoot}, peer: Peer{Name: "p1@X"},
		leases: map[uint64]*sched.Lease{l.ID: l}, outbox: make(chan *peerpb.ToPeer, 64), creditKick: make(chan struct{}, 1)}
	lctx, lcancel := context.WithCancel(ctx)
	leaser := make(chan error, 1)
	go func() { leaser <- w.lease(lctx) }()

	results := make(chan *peerpb.Result, 1)
	handled := make(chan error, 1)
	go func() {
		for range 1000 {
			if err := w.handle(ctx, &peerpb.FromPeer{Msg: &peerpb.FromPeer_Pull{Pull: &peerpb.Pull{N: 1}}}, results, nil); err != nil {
				handled <- err
				return
			}
		}
		handled <- w.handle(ctx, &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: &peerpb.Result{LeaseId: l.ID, Outcome: report.OutcomeOK}}}, results, nil)
	}()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatalf("receive loop: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the receive loop waited on the leaser: the result behind 1000 pulls never came through")
	}
	if res := <-results; res.LeaseId != l.ID {
		t.Fatalf("result of lease %d, want %d", res.LeaseId, l.ID)
	}

	// A peer cannot run the credit up without bound (the leaser, in
	// Next, takes none of it meanwhile).
	w.addCredit(1 << 40)
	if got := w.credit.Load(); got > maxCredit {
		t.Fatalf("credit %d, at most %d", got, maxCredit)
	}
	lcancel()
	if err := <-leaser; err != nil {
		t.Fatalf("leaser: %v", err)
	}
}
