//go:build linux

package pluginhost

import (
	"errors"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// TestFrozenTimeDoesNotCount: a task frozen by sandbox.Freeze (p2pc join
// --pause-when-busy) is not failed as timed out for the time it spent
// frozen, and a task that overruns its running time still is, its
// timeout moved by the frozen time.
func TestFrozenTimeDoesNotCount(t *testing.T) {
	if st := sandbox.Cgroups(); st.Version == 0 {
		t.Skipf("no cgroups here, nothing to freeze: %s", st)
	}
	pl := limitPool(t, true, sandbox.Limits{})
	runPID(t, pl) // warm
	const timeout = time.Second
	run := func(ms int, freeze time.Duration) (time.Duration, error) {
		t.Helper()
		h := newTestHost()
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := pl.Run(t.Context(), req("frozen", params{Op: "sleep", MS: ms, Ctx: true}), h, timeout)
			done <- err
		}()
		h.waitPartial(t, "pid") // the task runs
		if err := sandbox.Freeze(true); err != nil {
			t.Fatal(err)
		}
		if len(sandbox.Frozen()) == 0 {
			t.Fatal("Freeze froze nothing")
		}
		time.Sleep(freeze) // the pause itself, not a wait for a condition
		if err := sandbox.Freeze(false); err != nil {
			t.Fatal(err)
		}
		err := <-done
		return time.Since(start), err
	}
	// 600 ms of work, frozen 1.2 s in the middle: past the timeout on
	// the wall clock, well within it in running time.
	took, err := run(600, 1200*time.Millisecond)
	if err != nil {
		t.Fatalf("a task frozen for 1.2 s of its 600 ms failed (timeout %v): %v", timeout, err)
	}
	if took < timeout {
		t.Fatalf("took %v: the task did not outlast its timeout on the wall clock, this checks nothing", took)
	}
	// Endless work, frozen 500 ms: timed out after 1 s of running time.
	took, err = run(60_000, 500*time.Millisecond)
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrTimeout {
		t.Fatalf("endless task: err %v, want a timeout", err)
	}
	if took < timeout+500*time.Millisecond {
		t.Errorf("endless task timed out after %v: its frozen 500 ms counted", took)
	}
}
