package pluginhost

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// cpusBusy reports whether more threads are runnable on this machine
// than it has CPUs (the 4th field of /proc/loadavg, "runnable/all": an
// instant's count, not an average). It reads the file at most every
// busyEvery; in between it answers the last reading.
func cpusBusy() bool {
	now := time.Now().UnixNano()
	if at := busyAt.Load(); now-at < int64(busyEvery) && at != 0 {
		return busyLast.Load()
	}
	busy := runnable() > runtime.NumCPU()
	busyLast.Store(busy)
	busyAt.Store(now)
	return busy
}

const busyEvery = 2 * time.Millisecond

var (
	busyAt   atomic.Int64
	busyLast atomic.Bool
)

// runnable is the number of runnable threads /proc/loadavg gives; 0 if
// it cannot be read.
func runnable() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0
	}
	n, _, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(string(n))
	if err != nil {
		return 0
	}
	return v
}
