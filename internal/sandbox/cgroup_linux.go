//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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

// killWait bounds how long a kill waits for the processes of a cgroup
// to be gone.
const killWait = 5 * time.Second

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

// Cgroup is the cgroup of one plugin process and everything it starts:
// its limits hold for all of them together, and Kill ends them all.
type Cgroup struct {
	version int
	dirs    map[string]string // controller -> folder
	limits  Limits
	fd      int // v2: the folder, for clone into it; -1 on v1
	// pidsFd: pids.current, held open for KillOthers' quick check (-1
	// without the pids controller).
	pidsFd int
	// clean: pids.current when the plugin alone was in the cgroup, its
	// threads counted at that moment (-1: not known). See KillOthers.
	clean int64
	// seen oom_kill and pids max events (Exceeded reports new ones).
	oom, pidsMax int64
	mu           sync.Mutex
}

// NewCgroup makes a cgroup for one plugin process in this process's
// tree, with l's memory and process limits. It fails when the machine
// gives no cgroups (Cgroups says why).
func NewCgroup(l Limits) (*Cgroup, error) {
	t, st := cgroupRoot()
	if t == nil {
		return nil, fmt.Errorf("no cgroups: %s", st.Reason)
	}
	if isDisabled() {
		return nil, errors.New("no cgroups: confinement is off (test switch)")
	}
	return t.child("t"+strconv.FormatInt(t.n.Add(1), 10), l.WithDefaults())
}

func (t *cgroupTree) child(name string, l Limits) (*Cgroup, error) {
	c := &Cgroup{version: t.version, dirs: map[string]string{}, limits: l, fd: -1, pidsFd: -1, clean: -1}
	for ctrl, d := range t.dirs {
		if ctrl != cpuShared || t.version == 2 {
			c.dirs[ctrl] = filepath.Join(d, name)
		}
	}
	for _, d := range folders(c.dirs) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			c.Close()
			return nil, fmt.Errorf("make cgroup: %w", err)
		}
	}
	var err error
	if t.version == 1 {
		err = errors.Join(
			c.set("memory", "memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)),
			c.set("pids", "pids.max", strconv.Itoa(l.Pids)))
		// Without swap accounting a task could page out past its limit.
		if fileExists(filepath.Join(c.dirs["memory"], "memory.memsw.limit_in_bytes")) {
			err = errors.Join(err, c.set("memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(l.Memory, 10)))
		}
	} else {
		err = errors.Join(
			c.set("memory", "memory.max", strconv.FormatInt(l.Memory, 10)),
			c.set("pids", "pids.max", strconv.Itoa(l.Pids)))
		if fileExists(filepath.Join(c.dirs["memory"], "memory.swap.max")) {
			err = errors.Join(err, c.set("memory", "memory.swap.max", "0"))
		}
		fd, e := unix.Open(c.dirs["freezer"], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if e != nil {
			err = errors.Join(err, fmt.Errorf("open cgroup: %w", e))
		}
		c.fd = fd
	}
	if d, ok := c.dirs["pids"]; ok && err == nil {
		fd, e := unix.Open(filepath.Join(d, "pids.current"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if e != nil {
			err = fmt.Errorf("open pids.current: %w", e)
		}
		c.pidsFd = fd
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("set cgroup limits: %w", err)
	}
	c.oom, c.pidsMax = max(c.oomKills(), 0), max(c.pidsEvents(), 0)
	return c, nil
}

// set writes value to file of controller ctrl's folder (nothing when
// the controller is not in use).
func (c *Cgroup) set(ctrl, file, value string) error {
	d, ok := c.dirs[ctrl]
	if !ok {
		return nil
	}
	return writeFile(filepath.Join(d, file), value)
}

func (c *Cgroup) read(ctrl, file string) []byte {
	d, ok := c.dirs[ctrl]
	if !ok {
		return nil
	}
	return readSmall(filepath.Join(d, file))
}

// readSmall reads a small cgroup file with plain system calls: it runs
// after every task, and os.ReadFile's poller registration and buffer
// growth cost more than the read (nil on error).
func readSmall(path string) []byte {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var buf [4096]byte
	var out []byte
	for {
		n, err := unix.Read(fd, buf[:])
		if n > 0 {
			out = append(out, buf[:n]...)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return out
		}
	}
}

// Limits are the cgroup's limits.
func (c *Cgroup) Limits() Limits { return c.limits }

// StartConfined starts cmd from the calling thread (locked to its
// goroutine for good, see ConfineThread) confined to conf, at idle
// priority if l.Idle, and in cgroup c (nil for none) from its first
// instruction: on v2 the kernel clones it into c (CLONE_INTO_CGROUP); on
// v1 the thread joins c, forks, and goes back to the host's cgroups (a
// child is born in its parent thread's v1 cgroups). The cgroup files
// are opened before the thread is confined: Landlock would refuse them
// after.
func StartConfined(cmd *exec.Cmd, conf *Confinement, c *Cgroup, l Limits) (Status, error) {
	if l.Idle && !isDisabled() {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return Probe(), fmt.Errorf("idle priority: %w", err)
		}
		// The child keeps SCHED_IDLE; the thread, which goes on to wait
		// for the child's exit, gets its normal priority back.
		defer unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	}
	var back []*os.File
	defer func() {
		for _, f := range back {
			f.Close()
		}
	}()
	if c != nil && c.version == 2 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = c.fd
	} else if c != nil {
		t, _ := cgroupRoot()
		if t == nil {
			return Probe(), errors.New("start in cgroup: no cgroup tree")
		}
		// "0" moves the writing thread alone: the kernel then skips the
		// lock that a named thread's or process's move takes for
		// writing (cgroup_threadgroup_rwsem), whose first taking in a
		// while waits for an RCU grace period and so delays a run's first
		// plugin start.
		self := []byte("0")
		for _, d := range folders(t.home) {
			f, err := os.OpenFile(filepath.Join(d, "tasks"), os.O_WRONLY, 0)
			if err != nil {
				return Probe(), fmt.Errorf("start in cgroup: %w", err)
			}
			back = append(back, f)
		}
		defer func() {
			// The thread stays in c if this fails: it is the plugin's
			// own and ends with it, but c's limits count it.
			for _, f := range back {
				f.Write(self)
			}
		}()
		join := folders(c.dirs)
		if d := t.dirs[cpuShared]; d != "" && t.cpuCapped.Load() {
			join = append(join, d) // the tree's quota holds for it
		}
		for _, d := range join {
			if err := writeFile(filepath.Join(d, "tasks"), string(self)); err != nil {
				return Probe(), fmt.Errorf("start in cgroup: %w", err)
			}
		}
	}
	// On v2 the fork is a clone3 (CLONE_INTO_CGROUP) made under the
	// filter the thread installs: let it through there.
	st, err := conf.confineThread(c != nil && c.version == 2)
	if err != nil {
		return st, err
	}
	if cred := Credential(conf.pol); cred != nil { // the task user
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = cred
	}
	return st, cmd.Start()
}

// Procs lists the processes in the cgroup.
func (c *Cgroup) Procs() []int {
	return readProcs(folders(c.dirs)[0])
}

func readProcs(dir string) []int {
	b := readSmall(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

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

// pidsCurrent reads the held pids.current (-1 on error).
func (c *Cgroup) pidsCurrent() int64 {
	var buf [32]byte
	for {
		n, err := unix.Pread(c.pidsFd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return -1
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
		if err != nil {
			return -1
		}
		return v
	}
}

// threads is the number of threads of process pid (-1 if unknown), from
// /proc/PID/stat: the field after the command name's closing ')' is the
// 3rd, num_threads the 20th.
func threads(pid int) int64 {
	b := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 18 {
		return -1
	}
	n, err := strconv.ParseInt(f[17], 10, 64)
	if err != nil {
		return -1
	}
	return n
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

// Close kills every process of the cgroup and removes it.
func (c *Cgroup) Close() error {
	err := c.Kill()
	for _, d := range folders(c.dirs) {
		err = errors.Join(err, rmdirCgroup(d))
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	if c.pidsFd >= 0 {
		unix.Close(c.pidsFd)
		c.pidsFd = -1
	}
	return err
}

// rmdirCgroup removes an empty cgroup folder; the kernel may still be
// tearing down its last process for a moment (EBUSY).
func rmdirCgroup(d string) error {
	var err error
	for range 200 {
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, err)
}

func (c *Cgroup) oomKills() int64 {
	if c.version == 1 {
		n := keyed(c.read("memory", "memory.oom_control"), "oom_kill")
		if n < 0 { // kernels before 4.13: hits of the limit
			n, _ = strconv.ParseInt(strings.TrimSpace(string(c.read("memory", "memory.failcnt"))), 10, 64)
		}
		return n
	}
	return keyed(c.read("memory", "memory.events"), "oom_kill")
}

func (c *Cgroup) pidsEvents() int64 { return keyed(c.read("pids", "pids.events"), "max") }

// Exceeded says which limit the cgroup hit since the last call (or since
// it was made): a *LimitError for memory (the kernel killed a process of
// the group for it) or for processes (a fork was refused), else nil.
func (c *Cgroup) Exceeded() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if n := c.oomKills(); n > c.oom {
		c.oom = n
		err = &LimitError{What: "memory", Limit: c.limits.Memory}
	}
	if n := c.pidsEvents(); n > c.pidsMax {
		c.pidsMax = n
		if err == nil {
			err = &LimitError{What: "pids", Limit: int64(c.limits.Pids)}
		}
	}
	return err
}

// SetShare caps all plugin processes of this p2pc process together:
// cpus CPUs (fractional; 0 for no cap) and memory bytes (0 for none).
func SetShare(cpus float64, memory int64) error {
	t, st := cgroupRoot()
	if t == nil {
		return fmt.Errorf("no cgroups: %s", st.Reason)
	}
	var err error
	if cpus > 0 {
		d, ok := t.dirs["cpu"]
		switch {
		case !ok:
			err = errors.New("--cpus: no cpu controller")
		case t.version == 1:
			err = errors.Join(writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriod)),
				writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(cpuQuota(cpus), 10)))
		default:
			// The tree's parent hands the cpu controller down now (see
			// cpuShared), to the tree only.
			err = writeFile(filepath.Join(t.home[cpuShared], "cgroup.subtree_control"), "+cpu")
			if err == nil {
				err = writeFile(filepath.Join(d, "cpu.max"), cpuMax(cpus))
			}
		}
		if err == nil {
			t.cpuCapped.Store(true) // plugins started from now on
		}
	}
	if memory > 0 {
		file := "memory.max"
		if t.version == 1 {
			file = "memory.limit_in_bytes"
		}
		err = errors.Join(err, writeFile(filepath.Join(t.dirs["memory"], file), strconv.FormatInt(memory, 10)))
	}
	return err
}

// Freeze freezes (or thaws) every plugin process of this p2pc process.
// It freezes each plugin's cgroup, not their parent: a cgroup beneath a
// frozen parent cannot be thawed, so a plugin killed while paused (its
// timeout, a cancel, shutdown) could not die. A plugin started while
// paused is not frozen (p2pc join starts no task while paused).
func Freeze(on bool) error {
	frozenClock.set(on)
	dir, err := freezerTree()
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	var errs error
	for _, e := range ents {
		if fr := freezerAt(filepath.Join(dir, e.Name())); e.IsDir() && fr != nil {
			errs = errors.Join(errs, fr.set(on))
		}
	}
	return errs
}

// freezerTree is the tree's folder in the freezer hierarchy.
func freezerTree() (string, error) {
	t, st := cgroupRoot()
	if t == nil {
		return "", fmt.Errorf("no cgroups: %s", st.Reason)
	}
	d, ok := t.dirs["freezer"]
	if !ok {
		return "", errors.New("no freezer")
	}
	return d, nil
}

// Frozen lists the plugin cgroups of this p2pc process that are frozen
// (folder names), for tests and diagnostics.
func Frozen() []string {
	dir, err := freezerTree()
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if fr := freezerAt(filepath.Join(dir, e.Name())); e.IsDir() && fr != nil {
			if b, _ := os.ReadFile(fr.state); strings.Contains(string(b), fr.frozen) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// CPUUsage is the CPU time all plugin processes of this p2pc process
// have used (cpuacct.usage on v1, cpu.stat on v2).
func CPUUsage() (time.Duration, error) {
	t, st := cgroupRoot()
	if t == nil {
		return 0, fmt.Errorf("no cgroups: %s", st.Reason)
	}
	if t.version == 1 {
		d, ok := t.dirs["cpuacct"]
		if !ok {
			return 0, errors.New("no cpuacct controller")
		}
		b, err := os.ReadFile(filepath.Join(d, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(n), err
	}
	b, err := os.ReadFile(filepath.Join(t.dirs["freezer"], "cpu.stat"))
	if err != nil {
		return 0, err
	}
	return time.Duration(keyed(b, "usage_usec")) * time.Microsecond, nil
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

// Dir is the cgroup's folder in controller ctrl's hierarchy.
func (c *Cgroup) Dir(ctrl string) string { return c.dirs[ctrl] }

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
