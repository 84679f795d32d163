//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// cgroupPrefix starts the name of every cgroup p2pc makes for one of its
// processes: p2pc-PID-RANDOM (the PID for people; the lock decides).
const cgroupPrefix = "p2pc-"

// cgroupLockDir holds one lock file per p2pc process that owns a cgroup
// tree, named like the tree: a tree whose lock can be taken belongs to
// a process that is gone, and the next p2pc removes it. One folder for
// all the processes of a user, whatever their environment (not TMPDIR
// nor XDG_RUNTIME_DIR: processes of one user with different ones share
// the cgroup hierarchy): /run/p2pc/cgroups for root, /tmp/p2pc-cgroups-UID
// for another user, who cannot write /run and owns only the cgroups
// delegated to it.
var cgroupLockDir = lockDirFor(os.Geteuid())

func lockDirFor(uid int) string {
	if uid != 0 {
		return "/tmp/" + cgroupPrefix + "cgroups-" + strconv.Itoa(uid)
	}
	return "/run/p2pc/cgroups"
}

// makeLockDir makes dir if missing: for root, open to read; for another
// user, a folder of that user closed to others (dirlock.PrivateDir).
func makeLockDir(dir string, uid int) error {
	if uid == 0 {
		return os.MkdirAll(dir, 0o755)
	}
	return dirlock.PrivateDir(dir, uid)
}

// cgroupTree is the cgroup of one p2pc process (the parent of its plugin
// processes' cgroups): one folder per v1 hierarchy, or one v2 folder.
type cgroupTree struct {
	version int
	// dirs: controller -> the tree's folder in that controller's
	// hierarchy (v2: the same folder for all).
	dirs map[string]string
	// home: v1 controller -> the folder the host process lives in (the
	// starting thread goes back there).
	home   map[string]string
	status CgroupStatus
	lock   *dirlock.Lock
	n      atomic.Int64
	// cpuCapped: SetShare set a CPU quota on the tree; only then do the
	// plugins join its cpu group (see cpuShared).
	cpuCapped atomic.Bool
}

// cpuShared: the cpu controller groups no plugin process on its own. A
// plugin in another cpu group (task group) than the host costs every
// task round trip between them scheduler work on both sides, and buys
// nothing: the CPU cap (--cpus) is on the
// tree, for all plugins together. So the plugins stay in p2pc's own cpu
// group, and join the tree's (v1: its folder; v2: the cpu controller is
// enabled for the tree) only once SetShare sets a CPU quota.
const cpuShared = "cpu"

var cgroups struct {
	sync.Mutex
	tree   *cgroupTree
	status CgroupStatus
	done   bool
}

// Cgroups says whether this process's plugin processes get cgroups,
// making this process's cgroup tree on the first call (and removing the
// trees of p2pc processes that died without removing theirs).
func Cgroups() CgroupStatus {
	_, st := cgroupRoot()
	return st
}

func cgroupRoot() (*cgroupTree, CgroupStatus) {
	cgroups.Lock()
	defer cgroups.Unlock()
	if !cgroups.done {
		cgroups.done = true
		if noCgroupsEnv {
			cgroups.status = CgroupStatus{Reason: "switched off by " + NoCgroupsEnv + "=1"}
			return nil, cgroups.status
		}
		t, err := openTree()
		if err != nil {
			cgroups.status = CgroupStatus{Reason: err.Error()}
		} else {
			cgroups.tree, cgroups.status = t, t.status
		}
	}
	return cgroups.tree, cgroups.status
}

// NoCgroupsForTest makes this process give its plugins no cgroups until
// restore, as on a machine without them (a tree made before stays, unused).
func NoCgroupsForTest() (restore func()) {
	cgroups.Lock()
	saved := cgroups.tree
	savedStatus, savedDone := cgroups.status, cgroups.done
	cgroups.tree, cgroups.done = nil, true
	cgroups.status = CgroupStatus{Reason: "switched off for a test"}
	cgroups.Unlock()
	return func() {
		cgroups.Lock()
		cgroups.tree, cgroups.status, cgroups.done = saved, savedStatus, savedDone
		cgroups.Unlock()
	}
}

// CloseCgroups removes this process's cgroup tree (its plugin processes'
// cgroups must be closed first). Cgroups after it makes a new tree.
func CloseCgroups() error {
	cgroups.Lock()
	defer cgroups.Unlock()
	t := cgroups.tree
	cgroups.tree, cgroups.done, cgroups.status = nil, false, CgroupStatus{}
	if t == nil {
		return nil
	}
	return t.remove()
}

// openTree makes this process's cgroup tree where the machine allows:
// cgroup v1 when its memory and pids hierarchies are mounted, else v2.
func openTree() (*cgroupTree, error) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroup: %w", err)
	}
	v1, v2 := cgroupMounts(mounts)
	own := procCgroups(self)
	if v1["memory"] != "" && v1["pids"] != "" {
		bases := map[string]string{}
		for c, m := range v1 {
			bases[c] = filepath.Join(m, own[c])
		}
		return newTree(1, bases, []string{"memory", "pids"})
	}
	if v2 != "" {
		base := filepath.Join(v2, own[""])
		have, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		bases := map[string]string{}
		var enable []string
		for c := range strings.FieldsSeq(string(have)) {
			if isController(c) {
				bases[c] = base
				if c != cpuShared { // enabled by SetShare, for a quota
					enable = append(enable, "+"+c)
				}
			}
		}
		if len(enable) > 0 {
			// The host's own cgroup must hand the controllers down; v2
			// refuses that to a cgroup that holds processes (but the
			// root): run p2pc in a delegated cgroup of its own.
			if err := writeFile(filepath.Join(base, "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
				return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", base, err)
			}
		}
		// cgroup.kill and cgroup.freeze need no controller.
		bases["freezer"] = base
		return newTree(2, bases, []string{"memory", "pids"})
	}
	return nil, errors.New("no cgroup hierarchy mounted")
}

// newTree makes the tree p2pc-PID-RANDOM under bases (controller ->
// folder of this process's cgroup) after removing the trees there of
// dead p2pc processes. The controllers in required must be usable.
func newTree(version int, bases map[string]string, required []string) (*cgroupTree, error) {
	if err := makeLockDir(cgroupLockDir, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("cgroup lock folder: %w", err)
	}
	var sweepErr error
	for _, base := range freezerFirst(bases) {
		sweepErr = errors.Join(sweepErr, sweepCgroups(base))
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := cgroupPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	lock, err := dirlock.Acquire(filepath.Join(cgroupLockDir, name+".lock"))
	if err != nil {
		return nil, fmt.Errorf("cgroup lock: %w", err)
	}
	t := &cgroupTree{version: version, dirs: map[string]string{}, home: map[string]string{}, lock: lock}
	t.status.Version = version
	var why failures
	for _, c := range controllers {
		base, ok := bases[c]
		if !ok {
			continue
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			why.add(c, err)
			continue
		}
		t.dirs[c] = dir
		t.home[c] = base
		if version == 1 || c != "freezer" || fileExists(filepath.Join(dir, "cgroup.freeze")) {
			t.status.Controllers = append(t.status.Controllers, c)
		}
	}
	for _, c := range required {
		if t.dirs[c] == "" {
			t.remove()
			if len(why.errs) == 0 {
				why.add(c, errors.New("controller missing"))
			}
			return nil, fmt.Errorf("cgroup v%d: %s", version, why)
		}
	}
	if version == 2 {
		var enable []string
		for _, c := range t.status.Controllers {
			if c != "freezer" && c != cpuShared { // no cpu group per plugin
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			if err := writeFile(filepath.Join(t.dirs["freezer"], "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
				t.remove()
				return nil, fmt.Errorf("cgroup v2: enable controllers: %w", err)
			}
		}
	}
	if sweepErr != nil {
		// Leftovers are a nuisance, not a reason to run tasks unbounded.
		fmt.Fprintf(os.Stderr, "p2pc: removing cgroups of dead p2pc processes: %v\n", sweepErr)
	}
	return t, nil
}

// folders are the distinct folders of the tree (v1 hierarchies mounted
// together share one).
func folders(dirs map[string]string) []string {
	var out []string
	for _, c := range controllers {
		if d, ok := dirs[c]; ok && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// freezerFirst is folders(dirs) with the freezer's first: processes of
// a frozen cgroup die of SIGKILL only once it is thawed, so the v1
// freezer hierarchy is thawed and emptied before the others are.
func freezerFirst(dirs map[string]string) []string {
	out := folders(dirs)
	if f, ok := dirs["freezer"]; ok {
		out = append([]string{f}, slices.DeleteFunc(out, func(d string) bool { return d == f })...)
	}
	return out
}

// remove kills what is left in the tree, removes its folders and lets
// its lock go.
func (t *cgroupTree) remove() error {
	var err error
	for _, d := range freezerFirst(t.dirs) {
		err = errors.Join(err, removeCgroupDir(d))
	}
	if t.lock != nil {
		err = errors.Join(err, t.lock.Release())
	}
	return err
}

// failures groups the controllers whose tree folder could not be made
// by error, without the folders' paths: a peer gossips this reason, which
// must stay short and be the same for every process alike (the paths
// hold each process's tree name).
type failures struct {
	errs []string   // distinct errors, in order
	by   [][]string // controllers of each
}

func (f *failures) add(controller string, err error) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	msg := err.Error()
	for i, e := range f.errs {
		if e == msg {
			f.by[i] = append(f.by[i], controller)
			return
		}
	}
	f.errs = append(f.errs, msg)
	f.by = append(f.by, []string{controller})
}

func (f failures) String() string {
	parts := make([]string, len(f.errs))
	for i, e := range f.errs {
		parts[i] = strings.Join(f.by[i], ", ") + ": " + e
	}
	return strings.Join(parts, "; ")
}

// removeCgroupDir kills every process in the cgroup folder dir and its
// descendants and removes them (children first). It thaws dir first: a
// frozen process does not die of SIGKILL until it is thawed, and a child
// cannot be thawed beneath a frozen parent.
func removeCgroupDir(dir string) error {
	// The common case, at a p2pc's exit: its plugins' cgroups are gone
	// and nothing runs in the tree; the kernel refuses (EBUSY) a cgroup
	// with processes or children, which the rest handles.
	if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	fr := freezerAt(dir)
	if fr != nil {
		fr.set(false)
	}
	var errs error
	for _, e := range ents {
		if e.IsDir() {
			errs = errors.Join(errs, removeCgroupDir(filepath.Join(dir, e.Name())))
		}
	}
	if k := filepath.Join(dir, "cgroup.kill"); fileExists(k) {
		writeFile(k, "1")
	}
	errs = errors.Join(errs, killProcs(dir, fr, 0))
	return errors.Join(errs, rmdirCgroup(dir))
}

// sweepCgroups removes the trees in base of p2pc processes that are gone
// (their lock can be taken).
func sweepCgroups(base string) error {
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil // nothing to sweep, or not ours to read
	}
	var errs error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), cgroupPrefix) {
			continue
		}
		l, err := dirlock.Acquire(filepath.Join(cgroupLockDir, e.Name()+".lock"))
		if err != nil {
			continue // held: its owner runs
		}
		errs = errors.Join(errs, removeCgroupDir(filepath.Join(base, e.Name())))
		l.Release()
	}
	return errs
}

// TreeDir is the folder of this process's cgroup tree in controller
// ctrl's hierarchy ("" if none): for tests and diagnostics.
func TreeDir(ctrl string) string {
	t, _ := cgroupRoot()
	if t == nil {
		return ""
	}
	return t.dirs[ctrl]
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if e := f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Warm makes ahead, on a goroutine of its own, what the first confined
// start of this process needs: Probe's answers (and the network
// namespace it keeps for the first pool) and this process's cgroup tree.
// A caller overlaps it with its own start (p2pc run with its spec and
// plugin) and calls wait before it removes the tree (CloseCgroups).
// Nothing happens when confinement is off.
func Warm() (wait func()) {
	if isDisabled() {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Probe()
		Cgroups()
	}()
	return func() { <-done }
}
