package sched

import (
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// Near the end of a big job every running lease may be old enough to
// back up, and idle workers ask at every result: they get the oldest
// leases first, each once, from one scan of the running leases, not a
// scan per ask (a 16,384-task job spent a fifth to a third of its
// coordinator's CPU in these scans).
func TestBackupCandidatesFromOneScan(t *testing.T) {
	const n = 200
	f := newFixture(t, n, Config{Verify: verify(1, 1, 1)})
	first := f.take(t, "b")
	f.finish("b", first.TaskID, report.OutcomeOK, "d") // a median of a second
	var order []string
	for range n - 1 {
		l := f.take(t, "a")
		order = append(order, l.TaskID)
		f.clock.advance(time.Millisecond) // each lease younger than the last
	}
	f.clock.advance(3 * time.Second)
	for i := range 50 {
		peer := []string{"c", "d"}[i%2]
		l := f.q.TryNext(peer)
		if l == nil || l.TaskID != order[i] {
			t.Fatalf("ask %d by %s: backup %+v, want the oldest left, %s", i+1, peer, l, order[i])
		}
	}
	// a's own leases are no backups for a.
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("a got a backup of its own task %s", l.TaskID)
	}
	f.q.mu.Lock()
	scans := f.q.backup.scans
	f.q.mu.Unlock()
	if scans > 2 {
		t.Errorf("%d scans of every running lease for 51 asks, want 1 (2 at most)", scans)
	}
}

// Leases leased one after another become old enough one after another:
// an ask at each of those times does not scan every running lease each
// time (at most one scan per sixteenth of the threshold).
func TestBackupScansAreBounded(t *testing.T) {
	const n = 400
	f := newFixture(t, n, Config{Verify: verify(1, 1, 1)})
	first := f.take(t, "b")
	f.finish("b", first.TaskID, report.OutcomeOK, "d") // a median of a second: the threshold is 2 s
	for range n - 1 {
		f.take(t, "a")
		f.clock.advance(time.Millisecond)
	}
	f.clock.advance(2*time.Second - time.Duration(n)*time.Millisecond) // the first lease is just old enough
	f.q.mu.Lock()
	f.q.backup.scans = 0
	f.q.mu.Unlock()
	for range 200 { // 200 ms of asks, one per lease that came of age
		f.q.TryNext("a") // a's own: never a backup for a
		f.clock.advance(time.Millisecond)
	}
	f.q.mu.Lock()
	scans := f.q.backup.scans
	f.q.mu.Unlock()
	if limit := 200*time.Millisecond/(2*time.Second/rescanEvery) + 2; time.Duration(scans) > limit {
		t.Errorf("%d scans in 200 asks over 200 ms, want at most %d", scans, limit)
	}
}
