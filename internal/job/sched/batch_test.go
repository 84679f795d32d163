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
		{"tiny tasks, much left: BatchWork", 50 * us, 10000, 4, 256, 71},
		{"spec bound", 50 * us, 10000, 4, 8, 8},
		{"batching off", 50 * us, 10000, 4, 1, 1},
		{"tiny tasks near the end: MinBatchWork", 50 * us, 80, 4, 256, 14},
		{"the floor is bounded by what is left", 50 * us, 5, 4, 256, 5},
		{"last task", 50 * us, 1, 1, 256, 1},
		{"nothing left", 50 * us, 0, 4, 256, 1},
		{"no slots known", 50 * us, 100, 0, 256, 50},
		{"tracker: 2048 on 512 slots", 10 * us, 2048, 512, 256, 33},
		{"65536 on 512 slots: half a share", 10 * us, 65536, 512, 256, 64},
		{"1 us tasks: the task's cost in a batch counts", us, 100000, 4, 256, 238},
		{"sub-ms tasks: half a share", 480 * us, 80, 4, 256, 10},
		{"sub-ms tasks: the share rounds up", 480 * us, 65, 4, 256, 9},
		{"sub-ms tasks near the end: 1 ms floor", 480 * us, 8, 4, 256, 2},
		{"2 ms tasks", 2 * ms, 10000, 4, 256, 2},
		{"2 ms tasks near the end shrink to single", 2 * ms, 8, 4, 256, 1},
		{"5 ms tasks", 5 * ms, 10000, 4, 256, 1},
		{"100 ms tasks", 100 * ms, 10000, 4, 256, 1},
		{"1 s tasks are never batched", time.Second, 10000, 1, 256, 1},
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
	if n := f.q.BatchSize("a"); n != 1 {
		t.Fatalf("before any result: BatchSize = %d, want 1", n)
	}
	l := f.take(t, "a")
	// Leased, then waited 10 s in a batch; ran 100 us.
	start := f.clock.Now().Add(10 * time.Second)
	f.q.Finish(l, Result{Outcome: "ok", Start: start, End: start.Add(100 * time.Microsecond), Stage: "s", Files: []string{"data"}})
	// 5 ms / (100 + 20 us) = 41 per batch, under 998/8.
	if n := f.q.BatchSize("a"); n != 41 {
		t.Fatalf("after a 100 us task: BatchSize = %d, want 41", n)
	}
	f.q.SetSlots("b", 0) // b left
	for range 990 {
		f.take(t, "a")
	}
	// 9 tasks left over 2 slots: half a share is 3, but a batch carries
	// at least MinBatchWork: 1 ms / 120 us = 8.
	if n := f.q.BatchSize("a"); n != 8 {
		t.Fatalf("near the end: BatchSize = %d, want 8", n)
	}
}

// A spec bound of 1 turns batching off.
func TestQueueBatchOff(t *testing.T) {
	f := newFixture(t, 100, Config{BatchMax: 1})
	l := f.take(t, "a")
	f.q.Finish(l, Result{Outcome: "ok", End: f.clock.Now().Add(time.Microsecond), Stage: "s", Files: []string{"data"}})
	if n := f.q.BatchSize("a"); n != 1 {
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
	if n := f.q.BatchSize("a"); n != 41 {
		t.Fatalf("BatchSize = %d after a cold 200 ms call and two of 100 us, want 41", n)
	}
}
