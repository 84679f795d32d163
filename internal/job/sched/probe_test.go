package sched

import (
	"context"
	"testing"
	"time"
)

// The probe phase as a plain value: each step is a lease to a worker, a
// measure, or a look at whether a worker is held, at a time after the
// phase's first lease.
func TestProbe(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		at    time.Duration
		do    string // "lease", "measure", "hold"
		peer  string
		held  bool          // hold: want
		until time.Duration // hold: the wait it gives, if held
	}
	for _, tt := range []struct {
		name   string
		window time.Duration
		steps  []step
	}{
		{"no probe phase", 0, []step{
			{0, "lease", "a", false, 0}, {0, "hold", "a", false, 0},
		}},
		{"a worker's first lease is never held", 5 * ms, []step{
			{0, "hold", "a", false, 0}, {0, "lease", "a", false, 0}, {ms, "hold", "b", false, 0},
		}},
		{"one lease per worker, then wait for the window", 5 * ms, []step{
			{0, "lease", "a", false, 0}, {ms, "lease", "b", false, 0},
			{ms, "hold", "a", true, 4 * ms}, {2 * ms, "hold", "b", true, 3 * ms},
		}},
		{"the window counts from the first lease", 5 * ms, []step{
			{0, "lease", "a", false, 0}, {4 * ms, "lease", "b", false, 0},
			{5 * ms, "hold", "b", false, 0}, {5 * ms, "hold", "a", false, 0},
		}},
		{"a measure releases everyone", 5 * ms, []step{
			{0, "lease", "a", false, 0}, {ms, "measure", "", false, 0},
			{ms, "hold", "a", false, 0}, {ms, "lease", "a", false, 0}, {ms, "lease", "a", false, 0}, {ms, "hold", "a", false, 0},
		}},
		{"after the window the phase is over for good", 5 * ms, []step{
			{0, "lease", "a", false, 0}, {6 * ms, "hold", "a", false, 0},
			{6 * ms, "lease", "a", false, 0}, {6 * ms, "lease", "b", false, 0}, {6 * ms, "hold", "b", false, 0},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			p := newProbe(tt.window)
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "lease":
					p.leased(s.peer, now)
				case "measure":
					p.measured()
				case "hold":
					held, until := p.hold(s.peer, now)
					if held != s.held || until != s.until {
						t.Errorf("step %d: hold(%s) at +%v = %v, %v; want %v, %v", i, s.peer, s.at, held, until, s.held, s.until)
					}
				}
			}
		})
	}
}

// In a queue: a worker gets one lease until a run time is measured, then
// a batch sized by it.
func TestQueueProbeMeasured(t *testing.T) {
	f := newFixture(t, 1000, Config{Probe: ProbeWindow})
	f.q.SetSlots("a", 4)
	f.q.SetSlots("b", 4)
	la := f.take(t, "a")
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("probe phase: a got a second lease %s", l.TaskID)
	}
	f.take(t, "b") // b's own probe
	// a waits in Next until the measure comes.
	got := make(chan *Lease, 1)
	go func() {
		l, err := f.q.Next(t.Context(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	start := f.clock.Now()
	f.q.Finish(la, Result{Outcome: "ok", Start: start, End: start.Add(100 * time.Microsecond), Stage: "s", Files: []string{"data"}})
	select {
	case <-got:
	case <-time.After(5 * time.Second): // a bound on a failing test
		t.Fatal("Next stayed held after the first measure")
	}
	if n := f.q.BatchSize("a"); n != 41 {
		t.Fatalf("after the probe: BatchSize = %d, want 41", n)
	}
	for range 40 {
		if f.q.TryNext("a") == nil {
			t.Fatal("after the probe: a batch could not be taken")
		}
	}
}

// Without a measure within the window (long tasks, cold processes) every
// worker goes wide with single leases; Next, held, wakes at the window's
// end on its own.
func TestQueueProbeWindow(t *testing.T) {
	f := newFixture(t, 100, Config{Probe: ProbeWindow})
	f.q.SetSlots("a", 4)
	f.take(t, "a")
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("probe phase: a got a second lease %s", l.TaskID)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := f.q.Next(t.Context(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	f.clock.advance(ProbeWindow)
	select {
	case <-got:
	case <-time.After(5 * time.Second): // a bound on a failing test
		t.Fatal("Next stayed held after the probe window")
	}
	for range 3 {
		if f.q.TryNext("a") == nil {
			t.Fatal("after the window: a could not take single leases")
		}
	}
	if n := f.q.BatchSize("a"); n != 1 {
		t.Fatalf("unmeasured after the window: BatchSize = %d, want 1", n)
	}
}

// A queue without a probe window leases as many as asked at once.
func TestQueueNoProbe(t *testing.T) {
	f := newFixture(t, 10, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for range 10 {
		if _, err := f.q.Next(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
}
