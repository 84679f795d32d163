package harness

import (
	"fmt"
	"os"
	"testing"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// TestStaleOwners: lab objects are left behind only when their owner's
// lock is free, whatever their pid says. Owner 999999998 holds its lock
// (as a process in another PID namespace would, where that pid exists);
// 999999999 does not; 999999997 has no lock file.
func TestStaleOwners(t *testing.T) {
	if err := os.MkdirAll(LabLockDir, 0o755); err != nil {
		t.Skipf("no %s: %v", LabLockDir, err)
	}
	live, err := dirlock.Acquire(ownerLockPath(999999998))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	dead, err := dirlock.Acquire(ownerLockPath(999999999))
	if err != nil {
		t.Fatal(err)
	}
	dead.Unlock() // the owner died: its lock file is left, unlocked
	os.Remove(ownerLockPath(999999997))
	self := os.Getpid()
	owners := newStaleOwners()
	defer owners.release()
	for _, tc := range []struct {
		name string
		gone bool
	}{
		{fmt.Sprintf("p2pcb-%d-3", self), false},
		{fmt.Sprintf("p2pcb-%d-3-hub", self), false},
		{"p2pcb-999999998-1", false}, // lock held: alive, though no such pid here
		{"p2pcb-999999998-1-p2", false},
		{"p2pcb-999999999-1", true}, // lock free
		{"p2pcb-999999999-1-p2", true},
		{"p2pcb-999999997-1", false}, // no lock file: an owner from before the locks
		{"p2pcb-qout", false},        // not a lab object: never touched
		{"p2pcb-final", false},
		{"p2pcb-12-x", false},
		{"other-999999999-1", false},
	} {
		if got := owners.gone(tc.name); got != tc.gone {
			t.Errorf("gone(%q) = %v, want %v", tc.name, got, tc.gone)
		}
	}
	// While the sweep holds a gone owner's lock, nobody can claim it.
	if _, err := dirlock.Acquire(ownerLockPath(999999999)); err == nil {
		t.Error("a gone owner's lock could be taken during the sweep")
	}
}
