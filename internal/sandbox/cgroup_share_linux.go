//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

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
