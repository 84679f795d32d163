package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CPU quotas. A peer's capacity is a CFS bandwidth quota: so many
// microseconds of CPU time per 10 ms period (a short period gives steady
// throttling instead of bursts). Where the cpu controller lives on the
// cgroup v1 hierarchy the quota is cpu.cfs_quota_us / cpu.cfs_period_us;
// on cgroup v2 it is cpu.max. The Go runtime does not see such a quota
// reliably, so the lab also sets GOMAXPROCS for throttled peers.

// QuotaPeriod is the CFS period of every quota a lab sets.
const QuotaPeriod = 10 * time.Millisecond

// v1MountDir is where the lab mounts the cgroup v1 cpu controller when
// nothing else has (and cgroup v2 does not hold it).
const v1MountDir = "/run/p2pcb-cgroup-cpu"

// CPUController describes where CPU quotas can be set.
type CPUController struct {
	Version int    // 1 or 2
	Root    string // mount point of the hierarchy holding the cpu controller
	Mounted bool   // the lab mounted it (v1 only)
}

func (c CPUController) String() string {
	s := fmt.Sprintf("cgroup v%d cpu controller at %s", c.Version, c.Root)
	if c.Mounted {
		s += " (mounted by the lab)"
	}
	return s
}

// FindCPUController finds the cpu controller: on a cgroup v1 hierarchy
// (preferred), else on cgroup v2 if cgroup.controllers lists it, else it
// mounts the v1 controller at /run/p2pcb-cgroup-cpu.
func FindCPUController() (CPUController, error) {
	if ctl, err := findCPUControllerNoMount(); err == nil {
		return ctl, nil
	}
	if err := os.MkdirAll(v1MountDir, 0o755); err != nil {
		return CPUController{}, fmt.Errorf("find cpu controller: %w", err)
	}
	if err := mountCPUv1(v1MountDir); err != nil {
		return CPUController{}, fmt.Errorf("find cpu controller: no cgroup hierarchy has it and mounting cgroup v1 cpu at %s failed: %w", v1MountDir, err)
	}
	return CPUController{Version: 1, Root: v1MountDir, Mounted: true}, nil
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	if u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`); err == nil {
		return u
	}
	return s
}

// cpuCgroups is a lab's cgroup folder with one child per throttled peer.
type cpuCgroups struct {
	ctl CPUController
	dir string
}

func newCPUCgroups(ctl CPUController, name string) (*cpuCgroups, error) {
	c := &cpuCgroups{ctl: ctl, dir: filepath.Join(ctl.Root, name)}
	if ctl.Version == 2 {
		// Delegate the cpu controller down to the lab's folder.
		if err := enableV2CPU(ctl.Root); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w", c.dir, err)
	}
	if ctl.Version == 2 {
		if err := enableV2CPU(c.dir); err != nil {
			_ = os.Remove(c.dir)
			return nil, err
		}
	}
	return c, nil
}

func enableV2CPU(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	if b, err := os.ReadFile(f); err == nil && slices.Contains(strings.Fields(string(b)), "cpu") {
		return nil
	}
	if err := os.WriteFile(f, []byte("+cpu"), 0o644); err != nil {
		return fmt.Errorf("enable the cpu controller in %s: %w", dir, err)
	}
	return nil
}

// prioritise gives the lab's cgroup the highest CPU weight: while its
// processes want CPU, other work on the machine gets little. (Quotas still
// cap each peer.)
func (c *cpuCgroups) prioritise() error {
	file, val := "cpu.shares", "262144" // v1: 2..262144, default 1024
	if c.ctl.Version == 2 {
		file, val = "cpu.weight", "10000" // v2: 1..10000, default 100
	}
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(val), 0o644); err != nil {
		return fmt.Errorf("prioritise cgroup %s: %w", c.dir, err)
	}
	return nil
}

// add makes a child cgroup limited to cores CPUs (0: no limit) and
// returns the file a process writes its PID to in order to join it.
func (c *cpuCgroups) add(name string, cores float64) (string, error) {
	dir := filepath.Join(c.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	if cores <= 0 {
		return filepath.Join(dir, "cgroup.procs"), nil
	}
	period := QuotaPeriod.Microseconds()
	quota := max(int64(math.Round(cores*float64(period))), 1000) // the kernel's minimum is 1 ms
	var err error
	if c.ctl.Version == 1 {
		if err = os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.FormatInt(period, 10)), 0o644); err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0o644)
		}
	} else {
		err = os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, period), 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("set the cpu quota of %s to %.2f cores: %w", dir, cores, err)
	}
	return filepath.Join(dir, "cgroup.procs"), nil
}

// Throttled reads how often, and for how long in total, the kernel
// throttled a peer's cgroup (cpu.stat): a check that the quota acts.
func (c *cpuCgroups) throttled(name string) (periods int64, total time.Duration) {
	b, err := os.ReadFile(filepath.Join(c.dir, name, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_throttled":
			periods = v
		case "throttled_time": // v1, ns
			total = time.Duration(v)
		case "throttled_usec": // v2
			total = time.Duration(v) * time.Microsecond
		}
	}
	return periods, total
}

// remove kills what is left in the lab's cgroups and removes them.
func (c *cpuCgroups) remove() error {
	return removeCgroupTree(c.dir)
}

// removeCgroupTree kills every process in dir and its children and
// removes the folders, children first.
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		killCgroup(dir)
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			break
		}
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}

func killCgroup(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = killPID(pid)
		}
	}
}

// cgroupRemoveStale removes the lab cgroups of owners no longer running.
func cgroupRemoveStale(owners *staleOwners) ([]string, error) {
	var roots []string
	if ctl, err := findCPUControllerNoMount(); err == nil {
		roots = append(roots, ctl.Root)
	}
	if _, err := os.Stat(filepath.Join(v1MountDir, "cgroup.procs")); err == nil && !slices.Contains(roots, v1MountDir) {
		roots = append(roots, v1MountDir)
	}
	var removed []string
	var errs []error
	for _, root := range roots {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), LabPrefix) || !owners.gone(e.Name()) {
				continue
			}
			dir := filepath.Join(root, e.Name())
			if err := removeCgroupTree(dir); err != nil {
				owners.failedFor(e.Name())
				errs = append(errs, err)
				continue
			}
			removed = append(removed, "cgroup "+dir)
		}
	}
	return removed, errors.Join(errs...)
}

// findCPUControllerNoMount looks for a mounted hierarchy holding the cpu
// controller: cgroup v1 first, then v2.
func findCPUControllerNoMount() (CPUController, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return CPUController{}, err
	}
	defer f.Close()
	var v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		mnt := unescapeMount(lf[4])
		switch rf[0] {
		case "cgroup":
			if slices.Contains(strings.Split(rf[2], ","), "cpu") {
				return CPUController{Version: 1, Root: mnt}, nil
			}
		case "cgroup2":
			if b, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers")); err == nil &&
				slices.Contains(strings.Fields(string(b)), "cpu") && v2 == "" {
				v2 = mnt
			}
		}
	}
	if v2 != "" {
		return CPUController{Version: 2, Root: v2}, nil
	}
	return CPUController{}, errors.New("no cgroup hierarchy holds the cpu controller")
}

// PrioritiseSelf moves this process into a cgroup of the highest CPU
// weight (named like a lab's, so that a crash leaves nothing a later lab
// would not remove), for a benchmark driver that samples its labs while
// they keep every core busy. undo moves the process back to the root
// cgroup and removes the new one.
func PrioritiseSelf() (undo func() error, err error) {
	ctl, err := FindCPUController()
	if err != nil {
		return nil, err
	}
	name, err := LabName("0-self")
	if err != nil {
		return nil, err
	}
	c, err := newCPUCgroups(ctl, name)
	if err != nil {
		return nil, err
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	err = c.prioritise()
	if err == nil {
		err = os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), pid, 0o644)
	}
	if err != nil {
		_ = os.Remove(c.dir)
		return nil, fmt.Errorf("prioritise this process: %w", err)
	}
	return func() error {
		if err := os.WriteFile(filepath.Join(ctl.Root, "cgroup.procs"), pid, 0o644); err != nil {
			return fmt.Errorf("leave cgroup %s: %w", c.dir, err)
		}
		if err := os.Remove(c.dir); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
		}
		return nil
	}, nil
}
