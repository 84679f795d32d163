package job

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
)

// TestSettleLoopBatch: a peer's results queued together (a Results
// message) go through settleLoop's batch path (settleAll, FinishAll):
// each inline output decided done, a task error failed, a result for a
// lease the peer does not hold refused, and exactly the successful
// results acknowledged (the refused one too: the peer need not keep it).
func TestSettleLoopBatch(t *testing.T) {
	const n, failing = 20, 5
	r, _ := testRunner(t, n)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	q := newQueue(r, all, false)
	t.Cleanup(q.Close)
	w := &remoteWorker{s: &Session{r: r, q: q, workRoot: r.workRoot}, peer: Peer{Name: "p1@X"}, leases: map[uint64]*sched.Lease{}}
	w.acks.on = true
	results := make(chan *peerpb.Result, n+1)
	var okLeases []uint64
	for i := range n {
		// One lease per worker until a run time is measured: the leases
		// are taken as many workers', and held by w.
		l, err := q.Next(t.Context(), fmt.Sprintf("p%d@X", i))
		if err != nil {
			t.Fatal(err)
		}
		w.leases[l.ID] = l
		data := []byte("out " + l.TaskID)
		d := outputs.DigestInline(data)
		res := &peerpb.Result{LeaseId: l.ID, Outcome: report.OutcomeOK, Digest: d[:], Outputs: []*peerpb.Output{{Name: "data", Size: int64(len(data)), Data: data}}}
		if l.Task == failing {
			res = &peerpb.Result{LeaseId: l.ID, Outcome: report.OutcomeTaskError, Error: "it fails"}
		} else {
			okLeases = append(okLeases, l.ID)
		}
		results <- res
	}
	results <- &peerpb.Result{LeaseId: 99999, Outcome: report.OutcomeOK} // forged
	okLeases = append(okLeases, 99999)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.settleLoop(ctx, results)
	}()
	deadline := time.After(10 * time.Second) // a bound on a failing test, not a wait
	for {
		ch := q.Changed()
		if all, _ := q.Done(); all {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("the queue did not settle the batch")
		}
	}
	cancel()
	<-done
	r.mu.Lock()
	for i := range n {
		want := report.TaskDone
		if i == failing {
			want = report.TaskFailed
		}
		if got := r.recs.Task(i).State; got != want {
			t.Errorf("task %d is %s, want %s", i, got, want)
		}
	}
	r.mu.Unlock()
	w.acks.mu.Lock()
	var acked []uint64
	for _, p := range w.acks.q {
		acked = append(acked, p.lease)
	}
	w.acks.mu.Unlock()
	slices.Sort(acked)
	slices.Sort(okLeases)
	if !slices.Equal(acked, okLeases) {
		t.Errorf("acknowledged leases %v, want the successful results' %v", acked, okLeases)
	}
}
