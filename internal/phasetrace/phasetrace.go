package phasetrace

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// Env names the trace file.
const Env = "P2PC_PHASE_TRACE"

var (
	mu  sync.Mutex
	out *os.File // nil: off
	pid = os.Getpid()
)

// Opened at start, not at the first mark: a file's creation costs
// hundreds of microseconds, which would land in the first lease's phases.
func init() {
	if path := os.Getenv(Env); path != "" {
		out, _ = os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	}
}

// On reports whether marks are recorded.
func On() bool { return out != nil }

// Mark records that lease passed phase now.
func Mark(phase string, lease uint64) {
	if out != nil {
		At(phase, lease, time.Now())
	}
}

// At records that lease passed phase at t.
func At(phase string, lease uint64, t time.Time) {
	if out == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(out, "%d %d %s %d\n", t.UnixNano(), pid, phase, lease)
}
