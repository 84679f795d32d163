package main

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// tuneGC makes the collector run a quarter as often as Go's default
// (GOGC=400) unless GOGC is set. A peer or coordinator keeps a heap of a
// few MB and allocates per message: at the default it spent a sixth of
// its CPU collecting during a tiny-task job; the price is a few more MB.
// Two bounds keep the price small:
//
//   - a soft memory limit (smallHeapLimit, unless GOMEMLIMIT is set): a
//     live heap just under bigHeap would otherwise grow to five times
//     its size before a collection;
//   - while the live heap is over bigHeap, or for the whole run of a job
//     known to hold a big heap (expectBigHeap), the collector runs at
//     Go's default rate (memory about twice the live heap) with no limit
//     of ours (a limit under the live heap would make it collect without
//     end).
//
// It returns a func that stops the watch.
func tuneGC() (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	gc := &gcTuner{ownLimit: os.Getenv("GOMEMLIMIT") == ""}
	gc.apply(false)
	tuner.Store(gc)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		gc.watch(done, 100*time.Millisecond)
	}()
	return func() { close(done); wg.Wait() }
}

// tuner is tuneGC's, for expectBigHeap (nil: the rate is not ours).
var tuner atomic.Pointer[gcTuner]

// expectBigHeap runs the collector at Go's default rate from now on, for
// a job that is known to hold a big heap (a million tasks): at a quarter
// of the rate, the heap grows to five times its live part before a
// collection tells the watch how big it is.
func expectBigHeap() {
	if gc := tuner.Load(); gc != nil {
		gc.bigJob.Store(true)
		gc.apply(true)
	}
}

// bigHeap is the live heap above which the collector runs at Go's
// default rate; it goes back to a quarter of that below half as much.
const bigHeap = 48 << 20

// smallHeapLimit is the soft memory limit while the collector runs at a
// quarter of the default rate: what a live heap of bigHeap takes at the
// default rate (twice it), with room for the runtime's own memory.
const smallHeapLimit = 128 << 20

// gcTuner sets the collector's rate from the live heap.
type gcTuner struct {
	ownLimit bool        // the soft memory limit is ours to set
	bigJob   atomic.Bool // expectBigHeap was called
}

// gcBig says whether the collector runs at Go's default rate, given
// whether it does now (big), whether a big job was announced and the
// live heap: over bigHeap it does, under half of it it does not (in
// between it stays as it is), and a big job's run keeps it so whatever
// its heap (it starts small: the job's state is made after the watch
// first looks).
func gcBig(big, bigJob bool, live uint64) bool {
	switch {
	case bigJob:
		return true
	case live > bigHeap:
		return true
	case live < bigHeap/2:
		return false
	}
	return big
}

// apply sets the collector's rate and limit for big or not.
func (gc *gcTuner) apply(big bool) {
	percent, limit := 400, int64(smallHeapLimit)
	if big {
		percent, limit = 100, math.MaxInt64
	}
	debug.SetGCPercent(percent)
	if gc.ownLimit {
		debug.SetMemoryLimit(limit)
	}
}

// watch reads the live heap (as of the last collection) every period
// until done, and sets the collector's rate for it.
func (gc *gcTuner) watch(done <-chan struct{}, period time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	big := false
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // not this Go's metric: leave the rate alone
		}
		if now := gcBig(big, gc.bigJob.Load(), sample[0].Value.Uint64()); now != big {
			big = now
			gc.apply(big)
		}
	}
}
