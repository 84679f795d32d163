package harness

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Spin until this process has used CPU time of several clock ticks
	// (stat counts in ticks): 30 ms of wall time on a busy machine may
	// bring less than one.
	start := time.Now()
	for {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= 5*clockTick {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("no CPU time for this process within a minute")
		}
	}
	if d, err := ProcCPU(os.Getpid()); err != nil || d <= 0 {
		t.Errorf("ProcCPU = %v, %v", d, err)
	}
	if d, err := MachineCPU(); err != nil || d <= 0 {
		t.Errorf("MachineCPU = %v, %v", d, err)
	}
}
