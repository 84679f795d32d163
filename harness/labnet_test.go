package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// TestStaleOwners: lab objects are left behind only when their owner's
// lock is free, whatever their pid says. Owner 999999998 holds its lock
// (as a process in another PID namespace would, where that pid exists);
// 999999999 does not; 999999997 has no lock file.
func TestStaleOwners(t *testing.T) {
	dir, err := labLockDir()
	if err != nil {
		t.Fatal(err)
	}
	live, err := dirlock.Acquire(ownerLockPath(dir, 999999998))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	dead, err := dirlock.Acquire(ownerLockPath(dir, 999999999))
	if err != nil {
		t.Fatal(err)
	}
	dead.Unlock() // the owner died: its lock file is left, unlocked
	os.Remove(ownerLockPath(dir, 999999997))
	self := os.Getpid()
	owners := newStaleOwners(dir)
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
	if _, err := dirlock.Acquire(ownerLockPath(dir, 999999999)); err == nil {
		t.Error("a gone owner's lock could be taken during the sweep")
	}
}

// TestLabLockDirPrivate: a user's lock folder is refused unless it is a
// folder of that user closed to others (in a shared /tmp anyone can make
// the name first), and a user who is not root never uses root's.
func TestLabLockDirPrivate(t *testing.T) {
	uid := os.Geteuid()
	if uid < 0 {
		t.Skip("no uids on this system")
	}
	base := t.TempDir()
	good := filepath.Join(base, "made")
	if _, err := privateDir(good, uid); err != nil {
		t.Fatalf("a new folder: %v", err)
	}
	if fi, err := os.Stat(good); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v, %v; want mode 0700", fi, err)
	}
	if _, err := privateDir(good, uid+1); err == nil {
		t.Error("a folder of another uid was taken")
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := privateDir(open, uid); err == nil {
		t.Error("a folder open to others was taken")
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, err := privateDir(link, uid); err == nil {
		t.Error("a symlink was taken")
	}
	t.Setenv("TMPDIR", base)
	dir, err := labLockDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, fmt.Sprintf("p2pcb-locks-%d", uid)); uid != 0 && dir != want {
		t.Errorf("lock folder %s, want %s", dir, want)
	}
	if uid == 0 && dir != LabLockDir {
		t.Errorf("root's lock folder %s, want %s", dir, LabLockDir)
	}
}
