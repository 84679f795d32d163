package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/p2pc/p2pc/spec"
)

// Per-process defaults of Limits (a task whose spec names no
// resources.memory gets DefaultMemory).
const (
	// DefaultMemory caps one plugin process and everything it starts
	// when the job names no resources.memory.
	DefaultMemory = 2 << 30
	// DefaultPids caps the processes and threads of one plugin process
	// and everything it starts: a bound on fork bombs, far above what
	// work needs. A Go plugin uses about ten threads, but its runtime
	// starts more while its threads wait in system calls, most on a
	// starved machine (plugins run at idle priority), and dies ("fatal
	// error: newosproc") when it cannot; a renderer or encoder starts a
	// thread per core. Where rlimits stand in for cgroups the cap is
	// relative to what the task user runs machine-wide (Rlimits): at 64,
	// a fork bomb test's 200 processes of the same user left other
	// plugins of it unable to start a thread.
	DefaultPids = 512
	// DefaultFileSize is the largest file a task may write, and what its
	// work folder may hold, where nothing else says (the submitter's own
	// slots; Rlimits without a Limits.FileSize).
	DefaultFileSize = 4 << 30
	// AddressSlack is what RLIMIT_AS allows beyond Limits.Memory where
	// there is no cgroup (Rlimits): runtimes reserve far more address
	// space than they touch (glibc 64 MiB per thread's malloc arena and
	// 8 MiB per thread's stack; with 1 GiB a cgo Go plugin failed to
	// start threads).
	AddressSlack = 4 << 30
)

// Limits bound one plugin process and everything it starts (its
// cgroup; see Cgroup). Zero fields take the defaults.
type Limits struct {
	// Memory in bytes (default DefaultMemory): the kernel kills a
	// process of the group that would exceed it.
	Memory int64
	// Pids: processes and threads at once (default DefaultPids); fork
	// fails with EAGAIN past it.
	Pids int
	// FileSize is the largest file a process may write (RLIMIT_FSIZE),
	// 0 for no limit.
	FileSize int64
	// Idle runs the processes at idle priority (SCHED_IDLE): the
	// machine's other programs come first.
	Idle bool
}

// WithDefaults fills the zero fields of l with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	if l.Pids <= 0 {
		l.Pids = DefaultPids
	}
	return l
}

// ErrLimit matches every *LimitError.
var ErrLimit = errors.New("resource limit exceeded")

// LimitError says that a task was stopped by one of its limits:
// "exceeded memory limit 256 MiB", "process limit 64 reached",
// "exceeded disk limit 1 GiB".
type LimitError struct {
	What  string // "memory", "pids" or "disk"
	Limit int64  // bytes, or processes for "pids"
}

func (e *LimitError) Error() string {
	if e.What == "pids" {
		return fmt.Sprintf("process limit %d reached", e.Limit)
	}
	return fmt.Sprintf("exceeded %s limit %s", e.What, FormatSize(e.Limit))
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// FormatSize writes n bytes the way people read sizes: "256 MiB",
// "1.5 GiB", "4096 B".
func FormatSize(n int64) string { return spec.FormatSize(n) }

// CgroupStatus says whether task processes get cgroups on this machine.
type CgroupStatus struct {
	// Version is 1 or 2, 0 when p2pc makes no cgroups here.
	Version int
	// Controllers are those p2pc limits tasks with (memory, pids, cpu,
	// cpuacct, freezer).
	Controllers []string
	// Reason says why there are none (Version 0).
	Reason string
}

// Has reports whether controller c is in use.
func (c CgroupStatus) Has(ctrl string) bool {
	for _, x := range c.Controllers {
		if x == ctrl {
			return true
		}
	}
	return false
}

// String is "v1(memory,pids,cpu,freezer)", or "none (reason)".
func (c CgroupStatus) String() string {
	if c.Version == 0 {
		if c.Reason == "" {
			return "none"
		}
		return "none (" + c.Reason + ")"
	}
	return "v" + strconv.Itoa(c.Version) + "(" + strings.Join(c.Controllers, ",") + ")"
}

// procCgroups reads /proc/PID/cgroup: controller -> path, with "" for
// the unified (v2) hierarchy's line "0::/path". Named hierarchies
// ("name=systemd") are left out.
func procCgroups(data []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if !strings.HasPrefix(c, "name=") {
				m[c] = parts[2]
			}
		}
	}
	return m
}

// cgroupMounts reads /proc/self/mounts: v1 controller -> mount point,
// and the mount point of the unified hierarchy ("" if none).
func cgroupMounts(data []byte) (v1 map[string]string, v2 string) {
	v1 = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup2":
			if v2 == "" {
				v2 = unescapeMount(f[1])
			}
		case "cgroup":
			for o := range strings.SplitSeq(f[3], ",") {
				if _, ok := v1[o]; !ok && isController(o) {
					v1[o] = unescapeMount(f[1])
				}
			}
		}
	}
	return v1, v2
}

// controllers are the cgroup controllers p2pc uses, in the order it
// names them.
var controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

func isController(s string) bool {
	for _, c := range controllers {
		if c == s {
			return true
		}
	}
	return false
}

// unescapeMount undoes the octal escapes of /proc/self/mounts ("\040"
// for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// keyed reads the value of key in a flat keyed cgroup file ("oom_kill 3"
// lines of memory.events, memory.oom_control, pids.events): -1 when it
// is missing.
func keyed(data []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// cfsPeriod is the CPU quota period p2pc sets (microseconds): 10 ms
// throttles steadily (see the design notes).
const cfsPeriod = 10000

// cpuQuota is the quota in microseconds per cfsPeriod for cpus CPUs
// (at least 1 ms, the kernel's floor), or -1 for none.
func cpuQuota(cpus float64) int64 {
	if cpus <= 0 {
		return -1
	}
	return max(int64(math.Round(cpus*cfsPeriod)), 1000)
}

// cpuMax is the cgroup v2 cpu.max value for cpus CPUs.
func cpuMax(cpus float64) string {
	q := cpuQuota(cpus)
	if q < 0 {
		return "max " + strconv.Itoa(cfsPeriod)
	}
	return strconv.FormatInt(q, 10) + " " + strconv.Itoa(cfsPeriod)
}
