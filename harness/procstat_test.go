package harness

import (
	"os"
	"testing"
	"time"
)

func TestBusy(t *testing.T) {
	ms := time.Millisecond
	s := []CPUSample{{0, 0}, {100 * ms, 50 * ms}, {101 * ms, 60 * ms}, {200 * ms, 150 * ms}}
	at, busy := Busy(s, 50*ms)
	if len(at) != 2 || at[1] != 200*ms {
		t.Fatalf("at %v", at)
	}
	if busy[0] != 0.5 || busy[1] != 1.0 {
		t.Errorf("busy %v, want [0.5 1]: the 1 ms interval merged into the next", busy)
	}
}

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	deadline := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	if d, err := ProcCPU(os.Getpid()); err != nil || d <= 0 {
		t.Errorf("ProcCPU = %v, %v", d, err)
	}
	if d, err := MachineCPU(); err != nil || d <= 0 {
		t.Errorf("MachineCPU = %v, %v", d, err)
	}
}
