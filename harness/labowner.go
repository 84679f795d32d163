package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// Lab objects (network namespaces, cgroups, lab folders) are named
// LabPrefix + "<owner pid>-...". The pid makes names unique and tells
// people whose they are; ownership is a lock: before it names anything,
// a process takes <lock dir>/p2pcb-<pid>.lock (see LabLockDir) and holds
// it for its life.
// A sweep removes the objects of a name only when it can take that lock
// (their owner is gone), and holds it while it removes them. kill(pid, 0)
// would lie for an owner in another PID namespace.

// LabLockDir holds root's owners' lock files: root's namespaces and
// cgroups belong to the whole machine, and so does this folder.
const LabLockDir = "/run/p2pcb"

// labLockDir returns the folder of this user's owners' lock files, made
// if missing: LabLockDir for root; for another user, who cannot write
// there and whose lab objects can only be in what was delegated to it, a
// folder of its own beside its lab folders: os.TempDir()/p2pcb-locks-<uid>
// (a sweep that finds no lock file leaves the object alone).
// A user's folder must be a real folder owned by the user and closed to
// others (a shared /tmp lets anyone make the name first).
func labLockDir() (string, error) {
	uid := os.Geteuid()
	if uid <= 0 { // root, or no uids (windows)
		if err := os.MkdirAll(LabLockDir, 0o755); err != nil {
			return "", fmt.Errorf("make lab lock folder: %w", err)
		}
		return LabLockDir, nil
	}
	return privateDir(filepath.Join(os.TempDir(), LabPrefix+"locks-"+strconv.Itoa(uid)), uid)
}

// privateDir makes dir if missing and returns it if it is a folder of
// uid closed to others (dirlock.PrivateDir).
func privateDir(dir string, uid int) (string, error) {
	if err := dirlock.PrivateDir(dir, uid); err != nil {
		return "", fmt.Errorf("lab lock folder: %w", err)
	}
	return dir, nil
}

var (
	ownerOnce sync.Once
	ownerErr  error
	// ownerLock is held for the life of the process (and referenced
	// here for as long: an unreachable *os.File is closed by the GC,
	// and its lock with it).
	ownerLock *dirlock.Lock
)

// LabName returns LabPrefix + "<this process's pid>-" + suffix, after
// making sure this process owns such names (see LabLockDir).
func LabName(suffix string) (string, error) {
	ownerOnce.Do(func() {
		dir, err := labLockDir()
		if err != nil {
			ownerErr = fmt.Errorf("own lab names: %w", err)
			return
		}
		// Held until the process exits: never released.
		l, err := dirlock.Acquire(ownerLockPath(dir, os.Getpid()))
		ownerLock = l
		var held *dirlock.HeldError
		if errors.As(err, &held) {
			err = fmt.Errorf("lab names %s%d-* belong to %s (a process with this pid in another PID namespace)", LabPrefix, os.Getpid(), held.Owner)
		}
		if err != nil {
			ownerErr = fmt.Errorf("own lab names: %w", err)
		}
	})
	if ownerLock == nil {
		return "", ownerErr
	}
	return LabPrefix + strconv.Itoa(os.Getpid()) + "-" + suffix, nil
}

func ownerLockPath(dir string, pid int) string {
	return filepath.Join(dir, LabPrefix+strconv.Itoa(pid)+".lock")
}

// staleOwners decides, during one sweep, whose lab objects are left
// behind: it takes the locks of gone owners and holds them until release,
// so that no new owner with the same pid names anything meanwhile.
type staleOwners struct {
	dir    string // the lock files' folder (labLockDir)
	taken  map[int]*dirlock.Lock
	alive  map[int]bool
	failed map[int]bool // an object of theirs could not be removed
}

func newStaleOwners(dir string) *staleOwners {
	return &staleOwners{dir: dir, taken: map[int]*dirlock.Lock{}, alive: map[int]bool{}, failed: map[int]bool{}}
}

func labOwner(name string) (int, bool) {
	m := labNameRe.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, err == nil && pid > 0
}

// gone reports whether the lab object named name belongs to an owner that
// no longer holds its lock. A name that is not a lab object's, this
// process's names, and owners that cannot be judged count as alive: they
// are never touched. So do owners without a lock file (a p2pc from before
// the locks, or an unknown one): their objects live in /run and in the
// cgroup tree, and a reboot clears them.
func (s *staleOwners) gone(name string) bool {
	pid, ok := labOwner(name)
	if !ok || pid == os.Getpid() {
		return false
	}
	if _, ok := s.taken[pid]; ok {
		return true
	}
	if s.alive[pid] {
		return false
	}
	path := ownerLockPath(s.dir, pid)
	if _, err := os.Stat(path); err != nil {
		s.alive[pid] = true
		return false
	}
	l, err := dirlock.Acquire(path)
	if err != nil {
		s.alive[pid] = true
		return false
	}
	s.taken[pid] = l
	return true
}

// failedFor notes that an object named name could not be removed: its
// owner's lock file stays, so that a later sweep tries again.
func (s *staleOwners) failedFor(name string) {
	if pid, ok := labOwner(name); ok {
		s.failed[pid] = true
	}
}

// release lets go of the locks taken, removing the lock files of owners
// whose objects are all gone.
func (s *staleOwners) release() {
	for pid, l := range s.taken {
		if s.failed[pid] {
			l.Unlock()
		} else {
			l.Release()
		}
		delete(s.taken, pid)
	}
}

// sweepLockFiles removes the lock files in dir of owners gone that left
// no lab object behind (except those in skip).
func sweepLockFiles(dir string, skip map[int]bool) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pidText, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), LabPrefix), ".lock")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || skip[pid] {
			continue
		}
		if l, err := dirlock.Acquire(ownerLockPath(dir, pid)); err == nil {
			l.Release()
		}
	}
}
