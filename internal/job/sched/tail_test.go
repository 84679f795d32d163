package sched

import (
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// TestTailFreeSlotsOnly: once the tasks not yet leased are no more than
// the workers' slots, a worker whose slots are all taken gets no
// prefetch; the last task goes to the first slot that frees. Tasks
// shorter than a batch's work keep their prefetch.
func TestTailFreeSlotsOnly(t *testing.T) {
	f := newFixture(t, 7, Config{})
	f.q.SetSlots("a", 1)
	f.q.SetSlots("b", 1)
	f.finish("a", f.take(t, "a").TaskID, report.OutcomeOK, "d") // 1 s: the probe ends
	a1, a2 := f.take(t, "a"), f.q.TryNext("a")                  // a slot and a prefetch: 4 left
	b1 := f.take(t, "b")
	if a2 == nil || f.q.TryNext("b") == nil {
		t.Fatal("no prefetch while more tasks wait than there are slots")
	}
	f.leases["a/"+a2.TaskID] = a2
	// Two tasks left, two slots: both workers' slots are taken.
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("a, holding %s and %s on its one slot, got %s in the tail", a1.TaskID, a2.TaskID, l.TaskID)
	}
	// Held so, a waits for one of its own leases to end, not for any
	// other worker's result.
	f.q.mu.Lock()
	freed := f.q.slotFreedLocked("a")
	f.q.mu.Unlock()
	f.finish("b", b1.TaskID, report.OutcomeOK, "d")
	select {
	case <-freed:
		t.Fatal("a, held in the tail, was woken by b's result")
	default:
	}
	f.finish("a", a1.TaskID, report.OutcomeOK, "d")
	select {
	case <-freed:
	default:
		t.Fatal("a, held in the tail, was not woken by the end of its own lease")
	}
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("a, still holding %s, got %s in the tail", a2.TaskID, l.TaskID)
	}
	f.finish("a", a2.TaskID, report.OutcomeOK, "d")
	if l := f.q.TryNext("a"); l == nil {
		t.Fatal("a, its slot free, got nothing in the tail")
	}

	// Tasks of 100 us: batched, so the prefetch stays.
	f = newFixture(t, 7, Config{})
	f.q.SetSlots("a", 1)
	f.q.SetSlots("b", 1)
	l := f.take(t, "a")
	f.q.Finish(l, Result{Outcome: report.OutcomeOK, End: l.Start.Add(100 * time.Microsecond), Stage: "s", Files: []string{"data"}})
	f.take(t, "a")
	f.take(t, "b")
	f.q.TryNext("b")
	f.q.TryNext("b") // two left
	if f.q.TryNext("a") == nil {
		t.Fatal("short tasks: a got no prefetch in the tail")
	}
}
