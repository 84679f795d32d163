//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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

// Dir is the cgroup's folder in controller ctrl's hierarchy.
func (c *Cgroup) Dir(ctrl string) string { return c.dirs[ctrl] }
