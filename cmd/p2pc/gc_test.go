package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestGCBig: the collector runs at Go's default rate over bigHeap and
// back at a quarter below half of it, and for the whole run of a job
// announced big (expectBigHeap), even while its heap is still small:
// the watch once undid the announcement at its first look, before the
// job's state was made, and the heap then grew to five times its live
// part.
func TestGCBig(t *testing.T) {
	for _, c := range []struct {
		big, bigJob bool
		live        uint64
		want        bool
	}{
		{false, false, 1 << 20, false},
		{false, false, bigHeap + 1, true},
		{true, false, bigHeap * 3 / 4, true},
		{false, false, bigHeap * 3 / 4, false},
		{true, false, bigHeap/2 - 1, false},
		{false, true, 1 << 20, true},
		{true, true, 1 << 20, true},
		{true, true, 0, true},
	} {
		if got := gcBig(c.big, c.bigJob, c.live); got != c.want {
			t.Errorf("gcBig(big %v, big job %v, live %d) = %v, want %v", c.big, c.bigJob, c.live, got, c.want)
		}
	}
}

// TestGCTunerApply: a small heap runs at GOGC=400 under the soft limit,
// a big one at 100 with none of ours; with GOMEMLIMIT set by the user
// (ownLimit false) the limit is left as it is.
func TestGCTunerApply(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) }()
	read := func() (int, int64) {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p, debug.SetMemoryLimit(-1)
	}
	gc := &gcTuner{ownLimit: true}
	gc.apply(false)
	if p, l := read(); p != 400 || l != smallHeapLimit {
		t.Errorf("small heap: GOGC=%d, limit %d; want 400, %d", p, l, smallHeapLimit)
	}
	gc.apply(true)
	if p, l := read(); p != 100 || l != math.MaxInt64 {
		t.Errorf("big heap: GOGC=%d, limit %d; want 100, none", p, l)
	}
	debug.SetMemoryLimit(1 << 40)
	(&gcTuner{}).apply(false)
	if p, l := read(); p != 400 || l != 1<<40 {
		t.Errorf("small heap, GOMEMLIMIT set: GOGC=%d, limit %d; want 400 and the user's limit", p, l)
	}
}
