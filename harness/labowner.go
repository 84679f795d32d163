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
// a process takes LabLockDir/p2pcb-<pid>.lock and holds it for its life.
// A sweep removes the objects of a name only when it can take that lock
// (their owner is gone), and holds it while it removes them. kill(pid, 0)
// would lie for an owner in another PID namespace.

// LabLockDir holds the owners' lock files. Labs need root, and namespaces
// and cgroups belong to the whole machine: so does this folder.
const LabLockDir = "/run/p2pcb"

var (
	ownerOnce sync.Once
	ownerErr  error
)

// LabName returns LabPrefix + "<this process's pid>-" + suffix, after
// making sure this process owns such names (see LabLockDir).
func LabName(suffix string) (string, error) {
	ownerOnce.Do(func() {
		if err := os.MkdirAll(LabLockDir, 0o755); err != nil {
			ownerErr = fmt.Errorf("own lab names: %w", err)
			return
		}
		// Held until the process exits: never released.
		_, err := dirlock.Acquire(ownerLockPath(os.Getpid()))
		var held *dirlock.HeldError
		if errors.As(err, &held) {
			err = fmt.Errorf("lab names %s%d-* belong to %s (a process with this pid in another PID namespace)", LabPrefix, os.Getpid(), held.Owner)
		}
		if err != nil {
			ownerErr = fmt.Errorf("own lab names: %w", err)
		}
	})
	if ownerErr != nil {
		return "", ownerErr
	}
	return LabPrefix + strconv.Itoa(os.Getpid()) + "-" + suffix, nil
}

func ownerLockPath(pid int) string {
	return filepath.Join(LabLockDir, LabPrefix+strconv.Itoa(pid)+".lock")
}

// staleOwners decides, during one sweep, whose lab objects are left
// behind: it takes the locks of gone owners and holds them until release,
// so that no new owner with the same pid names anything meanwhile.
type staleOwners struct {
	taken map[int]*dirlock.Lock
	alive map[int]bool
}

func newStaleOwners() *staleOwners {
	return &staleOwners{taken: map[int]*dirlock.Lock{}, alive: map[int]bool{}}
}

// gone reports whether the lab object named name belongs to an owner that
// no longer holds its lock. A name that is not a lab object's, this
// process's names, and owners that cannot be judged count as alive: they
// are never touched.
func (s *staleOwners) gone(name string) bool {
	m := labNameRe.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	if _, ok := s.taken[pid]; ok {
		return true
	}
	if s.alive[pid] {
		return false
	}
	l, err := dirlock.Acquire(ownerLockPath(pid))
	if err != nil {
		s.alive[pid] = true
		return false
	}
	s.taken[pid] = l
	return true
}

// release lets go of the locks taken (removing their files).
func (s *staleOwners) release() {
	for _, l := range s.taken {
		l.Release()
	}
}

// sweepLockFiles removes the lock files of owners gone that left no lab
// object behind.
func sweepLockFiles() {
	entries, _ := os.ReadDir(LabLockDir)
	for _, e := range entries {
		pidText, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), LabPrefix), ".lock")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if l, err := dirlock.Acquire(ownerLockPath(pid)); err == nil {
			l.Release()
		}
	}
}
