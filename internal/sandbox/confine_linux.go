//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// fsRead is what ReadOnly paths grant.
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are the rights that apply to a file (not a folder).
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// device is what SystemDevices grant.
	device = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// fsHandled is every file right the kernel of ABI abi knows (capped at
// ABI 7's: rights of later ABIs stay allowed).
func fsHandled(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: EXECUTE .. MAKE_SYM
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

var probe struct {
	once sync.Once
	st   Status
}

// Probe says which confinements this machine gives (asked of the kernel
// once per process).
func Probe() Status {
	probe.once.Do(func() {
		v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if errno == 0 {
			probe.st.LandlockABI = int(v)
		}
		probe.st.NetNS = canUnshareNet()
		probe.st.Seccomp = haveSeccomp()
	})
	st := probe.st
	st.Disabled = isDisabled()
	return st
}

// canUnshareNet tries unshare(CLONE_NEWNET) on a throwaway locked thread.
func canUnshareNet() bool {
	ok := make(chan bool)
	go func() {
		lockForever()
		ok <- unix.Unshare(unix.CLONE_NEWNET) == nil
	}()
	return <-ok
}

// ConfineThread confines the calling OS thread, and so every process it
// forks from now on, to p (see the package comment). The caller has
// locked its goroutine to the thread and never unlocks it: the thread
// must die with the goroutine. It returns the confinements applied.
// A kernel without a mechanism is not an error (Status says what is
// missing); a path of p that cannot be opened is.
func ConfineThread(p Policy) (Status, error) {
	st := Probe()
	if st.Disabled {
		return st, nil
	}
	st = st.WithUser(p.User)
	if !p.Network && st.NetNS {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return st, fmt.Errorf("private network namespace: %w", err)
		}
	}
	if st.LandlockABI < 1 && !st.Seccomp {
		return st, nil
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return st, fmt.Errorf("no_new_privs: %w", err)
	}
	if st.LandlockABI >= 1 {
		fd, err := ruleset(st.LandlockABI, p)
		if err != nil {
			return st, err
		}
		_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0)
		unix.Close(fd)
		if errno != 0 {
			return st, fmt.Errorf("landlock restrict self: %w", errno)
		}
	}
	if st.Seccomp {
		if err := installSeccomp(p.Clone3); err != nil {
			return st, err
		}
	}
	return st, nil
}

// ruleset builds the Landlock ruleset of p for ABI abi.
func ruleset(abi int, p Policy) (int, error) {
	handled := fsHandled(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	size := unsafe.Sizeof(attr.Access_fs)
	if abi >= 4 {
		if !p.Network {
			attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
		size = unsafe.Offsetof(attr.Scoped)
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock create ruleset: %w", errno)
	}
	fd := int(r)
	add := func(path string, rights uint64, optional bool) error {
		err := addPath(fd, path, rights&handled)
		if err != nil && optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var err error
	for _, path := range SystemReadOnly {
		err = errors.Join(err, add(path, fsRead, true))
	}
	for _, path := range SystemDevices {
		err = errors.Join(err, add(path, device, true))
	}
	for _, path := range p.ReadOnly {
		err = errors.Join(err, add(path, fsRead, false))
	}
	for _, path := range p.ReadWrite {
		err = errors.Join(err, add(path, handled, false))
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// addPath allows rights beneath path (only the file rights if it is a
// file).
func addPath(fd int, path string, rights uint64) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(pfd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock rule for %s: %w", path, errno)
	}
	return nil
}

// MaxOpenFiles is the open-file limit (RLIMIT_NOFILE) Floor gives a task
// process.
const MaxOpenFiles = 65536

// Floor sets a started process's resource limits, the floor under the
// other confinements: no core files (RLIMIT_CORE 0) and at most
// MaxOpenFiles open files. It runs right after the exec, so the first
// instructions of the process run before it; a process run as root may
// raise them again (CAP_SYS_RESOURCE).
func Floor(pid int) error {
	if isDisabled() {
		return nil
	}
	err := floor(pid)
	if errors.Is(err, unix.EPERM) {
		// A process of the task user: a host without CAP_SYS_RESOURCE
		// may change its limits only as that user.
		err = asOwnerOf(pid, func() error { return floor(pid) })
	}
	if err != nil {
		return fmt.Errorf("set resource limits of %d: %w", pid, err)
	}
	return nil
}

func floor(pid int) error {
	err := unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
	var cur unix.Rlimit
	if e := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); e == nil && cur.Max > MaxOpenFiles {
		err = errors.Join(err, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: min(cur.Cur, MaxOpenFiles), Max: MaxOpenFiles}, nil))
	}
	return err
}

// asOwnerOf runs fn on a throwaway OS thread that has taken the user and
// group IDs of process pid (setresuid on one thread: the raw system call,
// not Go's, which changes every thread). The thread is never unlocked,
// so it ends with fn and the host's other threads keep their identity.
func asOwnerOf(pid int, fn func() error) error {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return fmt.Errorf("owner of %d: %w", pid, err)
	}
	done := make(chan error, 1)
	go func() {
		lockForever()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(st.Gid), uintptr(st.Gid), uintptr(st.Gid)); e != 0 {
			done <- fmt.Errorf("setresgid %d: %w", st.Gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(st.Uid), uintptr(st.Uid), uintptr(st.Uid)); e != 0 {
			done <- fmt.Errorf("setresuid %d: %w", st.Uid, e)
			return
		}
		done <- fn()
	}()
	return <-done
}
