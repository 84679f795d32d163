package pluginhost

import (
	"runtime"
	"testing"
	"time"
)

// TestStartDelayWhenCPUsBusy: a caller that has waited a start's time
// starts a process at once on a machine with a CPU to spare, and waits
// busyPatience starts' time in all while every CPU is busy.
func TestStartDelayWhenCPUsBusy(t *testing.T) {
	busy := false
	const cost = 10 * time.Millisecond
	pl := &Pool{all: map[*proc]struct{}{{}: {}}, startCost: cost, cpusBusy: func() bool { return busy }}
	for _, tc := range []struct {
		busy   bool
		waited time.Duration
		want   time.Duration
	}{
		{false, 0, cost},
		{false, cost / 2, cost / 2},
		{false, cost, 0},
		{true, cost / 2, cost / 2}, // not yet a start's time: busy or not
		{true, cost, (busyPatience - 1) * cost},
		{true, 3 * cost, (busyPatience - 3) * cost},
		{true, busyPatience * cost, 0},
		{true, 10 * busyPatience * cost, 0},
	} {
		busy = tc.busy
		if got := pl.startDelayLocked(tc.waited); got != tc.want {
			t.Errorf("busy %v, waited %v: delay %v, want %v", tc.busy, tc.waited, got, tc.want)
		}
	}
	// No process at all: start now, whatever the CPUs do.
	busy = true
	if got := (&Pool{startCost: cost, cpusBusy: func() bool { return busy }}).startDelayLocked(0); got != 0 {
		t.Errorf("empty pool: delay %v, want 0", got)
	}
}

// TestRunnable reads this machine's /proc/loadavg: at least this thread
// runs.
func TestRunnable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/loadavg is Linux's")
	}
	if n := runnable(); n < 1 {
		t.Fatalf("runnable() = %d, want >= 1", n)
	}
}
