package sched

import (
	"fmt"
	"testing"
	"time"
)

func TestBatchSize(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	for _, tt := range []struct {
		name               string
		mean               time.Duration
		left, slots, limit int
		want               int
	}{
		{"not measured yet", 0, 10000, 4, 256, 1},
		{"tiny tasks, much left", 50 * us, 10000, 4, 256, 100},
		{"spec bound", 50 * us, 10000, 4, 8, 8},
		{"batching off", 50 * us, 10000, 4, 1, 1},
		{"half a share of what is left", 50 * us, 80, 4, 256, 10},
		{"share rounds up", 50 * us, 81, 4, 256, 11},
		{"near the end", 50 * us, 8, 4, 256, 1},
		{"nearer the end", 50 * us, 3, 4, 256, 1},
		{"last task", 50 * us, 1, 1, 256, 1},
		{"nothing left", 50 * us, 0, 4, 256, 1},
		{"2 ms tasks", 2 * ms, 10000, 4, 256, 2},
		{"5 ms tasks", 5 * ms, 10000, 4, 256, 1},
		{"100 ms tasks", 100 * ms, 10000, 4, 256, 1},
		{"1 s tasks are never batched", time.Second, 10000, 1, 256, 1},
		{"no slots known", 50 * us, 100, 0, 256, 50},
		{"many slots", 10 * us, 2048, 512, 256, 2},
	} {
		if got := batchSize(tt.mean, tt.left, tt.slots, tt.limit); got != tt.want {
			t.Errorf("%s: batchSize(%v, left %d, slots %d, limit %d) = %d, want %d", tt.name, tt.mean, tt.left, tt.slots, tt.limit, got, tt.want)
		}
	}
}

// The queue measures run time from when a task started (not from its
// lease, which may have waited in a batch) and sizes batches from it.
func TestQueueBatchSize(t *testing.T) {
	f := newFixture(t, 1000, Config{})
	f.q.SetSlots("a", 2)
	f.q.SetSlots("b", 2)
	if n, measured := f.q.BatchSize("a"); n != 1 || measured {
		t.Fatalf("before any result: BatchSize = %d, %v; want 1, false", n, measured)
	}
	select {
	case <-f.q.Measured():
		t.Fatal("Measured closed before any result")
	default:
	}
	l := f.take(t, "a")
	// Leased, then waited 10 s in a batch; ran 100 us.
	start := f.clock.Now().Add(10 * time.Second)
	f.q.Finish(l, Result{Outcome: "ok", Start: start, End: start.Add(100 * time.Microsecond), Stage: "s", Files: []string{"data"}})
	<-f.q.Measured()
	// 5 ms / 100 us = 50 per batch, under 998/8.
	if n, measured := f.q.BatchSize("a"); n != 50 || !measured {
		t.Fatalf("after a 100 us task: BatchSize = %d, %v; want 50, true", n, measured)
	}
	f.q.SetSlots("b", 0) // b left
	for range 990 {
		f.take(t, "a")
	}
	// 9 tasks left over 2 slots: half a share each.
	if n, _ := f.q.BatchSize("a"); n != 3 {
		t.Fatalf("near the end: BatchSize = %d, want 3", n)
	}
}

// A spec bound of 1 turns batching off.
func TestQueueBatchOff(t *testing.T) {
	f := newFixture(t, 100, Config{BatchMax: 1})
	l := f.take(t, "a")
	f.q.Finish(l, Result{Outcome: "ok", End: f.clock.Now().Add(time.Microsecond), Stage: "s", Files: []string{"data"}})
	if n, _ := f.q.BatchSize("a"); n != 1 {
		t.Fatalf("BatchSize = %d with BatchMax 1, want 1", n)
	}
}

// The typical run time is a median: a cold first call does not stop
// batching.
func TestQueueBatchMedian(t *testing.T) {
	f := newFixture(t, 1000, Config{})
	f.q.SetSlots("a", 1)
	for i, d := range []time.Duration{200 * time.Millisecond, 100 * time.Microsecond, 100 * time.Microsecond} {
		l := f.take(t, "a")
		start := f.clock.Now()
		f.q.Finish(l, Result{Outcome: "ok", Start: start, End: start.Add(d), Stage: fmt.Sprint("s", i), Files: []string{"data"}})
	}
	if n, _ := f.q.BatchSize("a"); n != 50 {
		t.Fatalf("BatchSize = %d after a cold 200 ms call and two of 100 us, want 50", n)
	}
}
