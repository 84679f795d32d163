package sched

import (
	"fmt"
	"testing"
	"time"
)

// The tracker's shape: 2048 tiny tasks on 16 workers of 32 slots. Once a
// run time is measured, the first worker's leaser answers all its credits
// (its slots and prefetch: 48) with batches sized by the queue. It must
// end with about its share of the job, not most of it, and every worker
// after it gets its share too, in batches as large as the first's.
func TestFairShareOfTinyTasks(t *testing.T) {
	const peers, slots, tasks, credits = 16, 32, 2048, 48
	f := newFixture(t, tasks, Config{})
	for i := range peers {
		f.q.SetSlots(fmt.Sprintf("p%02d", i), slots)
	}
	// The probe: one lease, run in 5 us.
	l := f.take(t, "p00")
	f.q.Finish(l, Result{Outcome: "ok", End: l.Start.Add(5 * time.Microsecond), Stage: "s", Files: []string{"data"}})

	held := map[string]int{}
	biggest := 0
	for i := range peers {
		peer := fmt.Sprintf("p%02d", i)
		for range credits { // as remoteWorker.lease answers credits
			if f.q.TryNext(peer) == nil {
				break
			}
			n := 1
			for size := f.q.BatchSize(peer); n < size && f.q.TryNext(peer) != nil; n++ {
			}
			held[peer] += n
			biggest = max(biggest, n)
		}
	}
	share := (tasks - 1 + peers - 1) / peers
	for i := range peers {
		peer := fmt.Sprintf("p%02d", i)
		if held[peer] > share+1 || held[peer] < share-1 {
			t.Errorf("%s holds %d leases, want its share, %d", peer, held[peer], share)
		}
	}
	if biggest < 20 {
		t.Errorf("largest batch %d: tiny tasks should still go in batches of MinBatchWork (%d)", biggest, int(MinBatchWork/(5*time.Microsecond+batchTaskCost)))
	}
}

// A worker at its share gets more as its leases settle, and the bound
// never starves one: a worker without running leases always gets one
// while any task is pending.
func TestFairShareMovesWithTheWork(t *testing.T) {
	f := newFixture(t, 8, Config{})
	f.q.SetSlots("a", 1)
	f.q.SetSlots("b", 1)
	a1 := f.take(t, "a")
	a2 := f.take(t, "a")
	a3 := f.take(t, "a")
	a4 := f.take(t, "a") // 8 left over 2 slots: a's share is 4
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("a got a 5th lease (%s) with a share of 4", l.TaskID)
	}
	for _, l := range []*Lease{a1, a2, a3, a4} {
		f.q.Finish(l, Result{Outcome: "ok", End: l.Start.Add(time.Millisecond), Stage: "s", Files: []string{"data"}})
	}
	// 4 left, none running: a may hold 2 again.
	for i := range 2 {
		if f.q.TryNext("a") == nil {
			t.Fatalf("a got no lease %d of 2 after its leases settled", i+1)
		}
	}
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("a got a 3rd lease (%s) of 4 left with a share of 2", l.TaskID)
	}
	f.q.SetSlots("b", 0) // b left: a's share is everything
	if f.q.TryNext("a") == nil {
		t.Fatal("a got no lease once it was the only worker")
	}
}
