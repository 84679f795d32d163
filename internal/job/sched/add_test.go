package sched

import (
	"errors"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// Held tasks are not leased until released, keep the queue from
// draining, and are no stall; dropped ones settle neither done nor
// failed.
func TestHeldTasks(t *testing.T) {
	f := newFixture(t, 4, Config{Held: []int{1, 2, 3}})
	if got := f.q.Held(); got != 3 {
		t.Fatalf("Held() = %d, want 3", got)
	}
	f.take(t, "p")
	if l := f.q.TryNext("p"); l != nil {
		t.Fatalf("a held task was leased: %s", l.TaskID)
	}
	f.finish("p", "t0", report.OutcomeOK, "a")
	if all, _ := f.q.Done(); all {
		t.Fatal("the queue drained with tasks held")
	}
	f.clock.advance(time.Hour)
	if why, stalled := f.q.Stalled(time.Minute); stalled {
		t.Fatalf("a queue waiting on held tasks stalled: %s", why)
	}
	f.q.Release(2)
	f.q.Release(2) // twice: no effect
	if l := f.take(t, "p"); l.TaskID != "t2" {
		t.Fatalf("leased %s, want the released t2", l.TaskID)
	}
	f.finish("p", "t2", report.OutcomeOK, "b")
	f.q.Drop(1, 2) // t2 is not held: left as it is
	f.q.Release(3)
	f.take(t, "p")
	f.finish("p", "t3", report.OutcomeOK, "c")
	f.waitDone(t)
	all, failed := f.q.Done()
	if !all || failed != 0 {
		t.Fatalf("Done() = %v, %d; want true, 0", all, failed)
	}
	if f.q.Held() != 0 {
		t.Fatalf("Held() = %d after release and drop", f.q.Held())
	}
	for i, want := range []string{report.TaskDone, report.TaskPending, report.TaskDone, report.TaskDone} {
		if got := f.rep.Tasks[i].State; got != want {
			t.Errorf("task t%d: %s, want %s", i, got, want)
		}
	}
	if _, err := f.q.Next(t.Context(), "p"); !errors.Is(err, ErrDrained) {
		t.Fatalf("Next on a drained queue: %v", err)
	}
}
