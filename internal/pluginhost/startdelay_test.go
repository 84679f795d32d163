package pluginhost

import (
	"testing"
	"time"
)

// TestStartDelay: a caller that has waited a start's time starts a
// process at once, whatever else runs on the machine (the rule reads
// nothing but the pool's own measured starts); before that it waits the
// rest of a start's time; in an empty pool it starts one now.
func TestStartDelay(t *testing.T) {
	const cost = 10 * time.Millisecond
	pl := &Pool{all: map[*proc]struct{}{{}: {}}, startCost: cost}
	for _, tc := range []struct{ waited, want time.Duration }{
		{0, cost},
		{cost / 2, cost / 2},
		{cost, 0},
		{10 * cost, 0},
	} {
		if got := pl.startDelayLocked(tc.waited); got != tc.want {
			t.Errorf("waited %v: delay %v, want %v", tc.waited, got, tc.want)
		}
	}
	if got := (&Pool{startCost: cost}).startDelayLocked(0); got != 0 {
		t.Errorf("empty pool: delay %v, want 0", got)
	}
	if got := (&Pool{all: map[*proc]struct{}{{}: {}}}).startDelayLocked(time.Hour); got >= 0 {
		t.Errorf("no start timed yet: delay %v, want < 0 (wait for the first)", got)
	}
}
