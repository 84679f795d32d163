//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// killWait bounds how long a kill waits for the processes of a cgroup
// to be gone.
const killWait = 5 * time.Second

// KillOthers SIGKILLs every process of the cgroup but keep (the warm
// plugin process, between tasks) and waits until they are gone: what a
// task started does not outlive it. left says whether there were any.
//
// It runs after every task, so the common case is one pread of the
// pids controller's counter (held open): when it equals clean, the
// number of the plugin's threads when it was last alone in the cgroup,
// there is nothing else. The counter counts every thread of every
// process of the group, zombies until they are reaped; the plugin's
// threads never become fewer (the Go runtime keeps its threads; a
// plugin that made its threads fewer on purpose gains nothing by it: it
// is the task's own code and lives on between tasks anyway). Any other
// value, and no pids controller, reads cgroup.procs (v1 builds a list
// of the group's processes for it: ten times the cost).
func (c *Cgroup) KillOthers(keep int) (left bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clean >= 0 && c.pidsCurrent() == c.clean {
		return false, nil
	}
	dir := folders(c.dirs)[0]
	self := os.Getpid()
	if len(slices.DeleteFunc(readProcs(dir), func(p int) bool { return p == keep || p == self })) > 0 {
		left, err = true, killProcs(dir, c.freezerFile(), keep)
	}
	c.clean = -1
	if err == nil && c.pidsFd >= 0 {
		c.clean = threads(keep)
	}
	return left, err
}

// Kill SIGKILLs every process of the cgroup and waits until they are
// gone.
func (c *Cgroup) Kill() error {
	if c.version == 2 {
		if d := c.dirs["freezer"]; fileExists(filepath.Join(d, "cgroup.kill")) {
			if err := writeFile(filepath.Join(d, "cgroup.kill"), "1"); err == nil {
				return waitEmpty(d, 0)
			}
		}
	}
	return c.kill(0)
}

func (c *Cgroup) kill(keep int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	freezer := c.freezerFile()
	return killProcs(folders(c.dirs)[0], freezer, keep)
}

// freezerFile names the cgroup's freezer (nil without one).
func (c *Cgroup) freezerFile() *freezer {
	d, ok := c.dirs["freezer"]
	if !ok {
		return nil
	}
	return freezerAt(d)
}

// freezerAt names the freezer of cgroup folder d: its file and the
// values that freeze and thaw it (v1 freezer.state, v2 cgroup.freeze;
// nil when d has neither, as the folders of other v1 hierarchies).
func freezerAt(d string) *freezer {
	if f := filepath.Join(d, "freezer.state"); fileExists(f) {
		return &freezer{file: f, on: "FROZEN", off: "THAWED", state: f, frozen: "FROZEN"}
	}
	if f := filepath.Join(d, "cgroup.freeze"); fileExists(f) {
		return &freezer{file: f, on: "1", off: "0", state: filepath.Join(d, "cgroup.events"), frozen: "frozen 1"}
	}
	return nil
}

type freezer struct{ file, on, off, state, frozen string }

// freezes counts the freezes asked for (tests).
var freezes atomic.Int64

// set freezes (and waits until the kernel says frozen) or thaws.
// freezeWait bounds how long freezing a cgroup may take.
const freezeWait = 5 * time.Second

func (f *freezer) set(on bool) error {
	if !on {
		return writeFile(f.file, f.off)
	}
	freezes.Add(1)
	if err := writeFile(f.file, f.on); err != nil {
		return err
	}
	// A v1 freezer may stay FREEZING while a task is in a state it cannot
	// be frozen in (mid-exec, in uninterruptible I/O); writing FROZEN
	// again retries, so ask every 50 ms until it holds.
	start := time.Now()
	for n := 1; time.Since(start) < freezeWait; n++ {
		b, _ := os.ReadFile(f.state)
		if strings.Contains(string(b), f.frozen) {
			return nil
		}
		time.Sleep(time.Millisecond)
		if n%50 == 0 {
			if err := writeFile(f.file, f.on); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("cgroup not frozen within %s", freezeWait)
}

// killProcs SIGKILLs the processes in cgroup folder dir but keep (and
// never this process) and waits until they are gone. A round kills what
// it reads; that is all it takes unless something forks meanwhile: a
// later round that finds a process it has not killed yet (a fork) first
// freezes the group, with a freezer, so that nothing forks or exits
// (and frees its PID) while it is read and killed; one that finds only
// processes it killed waits for them (a process of many threads takes a
// while to go on a loaded machine). Not the first round, nor a wait:
// a p2pc killed between freezing and thawing leaves its processes
// frozen, undying, until the next p2pc on the machine sweeps its tree
// (peers stopped with SIGKILL while they shut down, their plugins killed
// one by one, left dozens so). Unfrozen, a process read may exit before
// the kill; its PID is not handed out again that soon (the kernel
// allocates PIDs in turn, up to pid_max).
func killProcs(dir string, fr *freezer, keep int) error {
	self := os.Getpid()
	deadline := time.Now().Add(killWait)
	killed := map[int]bool{}
	for {
		others := slices.DeleteFunc(readProcs(dir), func(p int) bool { return p == keep || p == self })
		if len(others) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill cgroup %s: %d processes left after %v", dir, len(others), killWait)
		}
		forked := len(killed) > 0 && slices.ContainsFunc(others, func(p int) bool { return !killed[p] })
		if len(killed) > 0 && !forked {
			waitEmptyBrief(dir, keep, self)
			continue
		}
		frozen := forked && fr != nil && fr.set(true) == nil
		if frozen {
			others = slices.DeleteFunc(readProcs(dir), func(p int) bool { return p == keep || p == self })
		}
		for _, p := range others {
			unix.Kill(p, unix.SIGKILL)
			killed[p] = true
		}
		if fr != nil {
			fr.set(false)
		}
		waitEmptyBrief(dir, keep, self)
	}
}

// waitEmptyBrief waits up to 100 ms for the killed processes to leave.
func waitEmptyBrief(dir string, keep, self int) {
	for range 100 {
		left := slices.DeleteFunc(readProcs(dir), func(p int) bool { return p == keep || p == self })
		if len(left) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// waitEmpty waits until no process but keep is in dir.
func waitEmpty(dir string, keep int) error {
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		if len(slices.DeleteFunc(readProcs(dir), func(p int) bool { return p == keep })) == 0 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("cgroup %s not empty after %v", dir, killWait)
}
