package harness

import (
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
