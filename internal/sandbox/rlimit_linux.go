//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Rlimits caps a started process that got no cgroup (see Cgroups) with
// resource limits instead, on top of Floor's:
//
//   - RLIMIT_NPROC: its user may run l.Pids more processes and threads
//     than it ran when the process started (the kernel counts a user's
//     tasks machine-wide, so the cap is relative: a fork past it fails
//     with EAGAIN);
//   - RLIMIT_AS: an address space of at most l.Memory plus AddressSlack
//     (the address space, not the memory used: the Go runtime and shared
//     libraries map more than they touch);
//   - RLIMIT_FSIZE: files of at most l.FileSize bytes, DefaultFileSize
//     when l names none.
//
// Like Floor, it asks as the process's owner when the host may not.
func Rlimits(pid int, l Limits) error {
	if isDisabled() {
		return nil
	}
	if err := asHostOrOwner(pid, func() error { return rlimits(pid, l) }); err != nil {
		return fmt.Errorf("set resource limits of %d (no cgroup): %w", pid, err)
	}
	return nil
}

func rlimits(pid int, l Limits) error {
	l = l.WithDefaults()
	uid, err := realUID(pid)
	if err != nil {
		return err
	}
	nproc := uint64(userTasks(uid) + l.Pids)
	as := uint64(l.Memory + AddressSlack)
	fsize := uint64(l.FileSize)
	if fsize == 0 {
		fsize = DefaultFileSize
	}
	var errs []error
	for _, r := range []struct {
		what     string
		resource int
		max      uint64
	}{{"processes", unix.RLIMIT_NPROC, nproc}, {"address space", unix.RLIMIT_AS, as}, {"file size", unix.RLIMIT_FSIZE, fsize}} {
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, r.resource, nil, &cur); err == nil && cur.Max <= r.max {
			continue // as low already
		}
		if err := unix.Prlimit(pid, r.resource, &unix.Rlimit{Cur: r.max, Max: r.max}, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s limit: %w", r.what, err))
		}
	}
	return errors.Join(errs...)
}

// realUID is the real user ID of process pid (/proc/PID/status).
func realUID(pid int) (uint32, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("user of %d: %w", pid, err)
	}
	uid, _, ok := statusUIDThreads(data)
	if !ok {
		return 0, fmt.Errorf("user of %d: no Uid line in /proc/%d/status", pid, pid)
	}
	return uid, nil
}

// userTasks counts the processes and threads whose real user is uid, as
// this process sees them (/proc): what RLIMIT_NPROC counts.
func userTasks(uid uint32) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone
		}
		if u, threads, ok := statusUIDThreads(data); ok && u == uid {
			n += threads
		}
	}
	return n
}

// statusUIDThreads reads the real user ID and the thread count of a
// /proc/PID/status file.
func statusUIDThreads(data []byte) (uid uint32, threads int, ok bool) {
	threads = 1
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch string(k) {
		case "Uid":
			if u, err := strconv.ParseUint(string(f[0]), 10, 32); err == nil {
				uid, ok = uint32(u), true
			}
		case "Threads":
			if t, err := strconv.Atoi(string(f[0])); err == nil {
				threads = t
			}
		}
	}
	return uid, threads, ok
}
