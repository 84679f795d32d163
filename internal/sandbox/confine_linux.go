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
// once per process). While confinement is off it asks nothing and says
// only that (the probe makes a network namespace: a P2PC_SANDBOX=off
// run, the baseline of confinement's cost, must not pay for one).
func Probe() Status {
	if isDisabled() {
		return Status{Disabled: true}
	}
	probe.once.Do(func() {
		v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if errno == 0 {
			probe.st.LandlockABI = int(v)
		}
		probe.st.NetNS = probeNetNS()
		probe.st.Seccomp = haveSeccomp()
	})
	st := probe.st
	st.Disabled = isDisabled()
	return st
}

// probeNetNS makes a private network namespace to learn whether the
// host may, and keeps it as the spare that the first Confinement takes
// (no namespace is made in vain).
func probeNetNS() bool {
	ns, err := newNetNS()
	if err != nil {
		return false
	}
	spare.Lock()
	spare.ns = ns
	spare.Unlock()
	return true
}

// spare is the network namespace Probe made, until a Confinement takes
// it.
var spare struct {
	sync.Mutex
	ns *netNS
}

// takeNetNS is the spare network namespace, or a new one.
func takeNetNS() (*netNS, error) {
	spare.Lock()
	ns := spare.ns
	spare.ns = nil
	spare.Unlock()
	if ns != nil {
		return ns, nil
	}
	return newNetNS()
}

// Confinement is a Policy made ready for the processes of one pool (one
// job on one peer): its private network namespace is made on the first
// start and joined (setns) by every later one, instead of a namespace
// per process, whose making and asynchronous teardown were the dearest
// part of a confined start. Each process still gets a Landlock domain
// of its own, from a ruleset built at its start (a ruleset holds the
// files it names, not their paths: one kept for the pool's life would
// miss a file replaced meanwhile, as a re-exported plugin or a renamed
// /etc/resolv.conf), and a seccomp filter of its own. Safe for
// concurrent use; Close it once its last process has started.
type Confinement struct {
	pol Policy

	mu sync.Mutex
	ns *netNS // nil with the network, without namespaces, or before the first start
}

// NewConfinement prepares nothing yet: the first start does.
func NewConfinement(p Policy) *Confinement { return &Confinement{pol: p} }

// Policy is the confinement's policy.
func (c *Confinement) Policy() Policy { return c.pol }

// Close lets the namespace go (it lives on while a process is in it). A
// start after Close makes a new one.
func (c *Confinement) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == nil {
		return nil
	}
	err := c.ns.close()
	c.ns = nil
	return err
}

// ConfineThread confines the calling OS thread, and so every process it
// forks from now on, to p (see docs/design/sandbox.md). The caller has
// locked its goroutine to the thread and never unlocks it: the thread
// must die with the goroutine. It returns the confinements applied.
// A kernel without a mechanism is not an error (Status says what is
// missing); a path of p that cannot be opened is.
func ConfineThread(p Policy) (Status, error) {
	c := NewConfinement(p)
	defer c.Close()
	return c.confineThread(p.Clone3)
}

// confineThread confines the calling thread as ConfineThread does, in
// the confinement's network namespace (made on the first call); clone3
// as Policy.Clone3.
func (c *Confinement) confineThread(clone3 bool) (Status, error) {
	st := Probe()
	if st.Disabled {
		return st, nil
	}
	st = st.WithUser(c.pol.User)
	if !c.pol.Network && st.NetNS {
		if err := c.joinNetNS(); err != nil {
			return st, err
		}
	}
	if st.LandlockABI < 1 && !st.Seccomp {
		return st, nil
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return st, fmt.Errorf("no_new_privs: %w", err)
	}
	if st.LandlockABI >= 1 {
		fd, err := ruleset(st.LandlockABI, c.pol)
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
		if err := installSeccomp(clone3); err != nil {
			return st, err
		}
	}
	return st, nil
}

// joinNetNS moves the calling thread into the confinement's network
// namespace, taking one first if it has none.
func (c *Confinement) joinNetNS() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == nil {
		ns, err := takeNetNS()
		if err != nil {
			return err
		}
		c.ns = ns
	}
	return c.ns.join()
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
	for _, path := range p.Devices {
		err = errors.Join(err, add(path, device, false))
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
// other confinements: no core files (RLIMIT_CORE 0), at most
// MaxOpenFiles open files, and files of at most l.FileSize bytes
// (RLIMIT_FSIZE; none when 0). It runs right after the exec, before the
// plugin's handshake (so before any task), but the first instructions
// of the process run before it. A process of the task user gets them
// from a thread that has taken its IDs: a root without
// CAP_SYS_RESOURCE (as in many containers) may not change another
// user's limits, only lower its own process's.
func Floor(pid int, l Limits) error {
	if isDisabled() {
		return nil
	}
	if err := asHostOrOwner(pid, func() error { return floor(pid, l) }); err != nil {
		return fmt.Errorf("set resource limits of %d: %w", pid, err)
	}
	return nil
}

// asHostOrOwner runs set, and again as the owner of process pid if the
// host may not (EPERM; see asOwnerOf).
func asHostOrOwner(pid int, set func() error) error {
	err := set()
	if errors.Is(err, unix.EPERM) {
		err = asOwnerOf(pid, set)
	}
	return err
}

func floor(pid int, l Limits) error {
	err := unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
	var cur unix.Rlimit
	if e := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); e == nil && cur.Max > MaxOpenFiles {
		err = errors.Join(err, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: min(cur.Cur, MaxOpenFiles), Max: MaxOpenFiles}, nil))
	}
	if l.FileSize > 0 {
		lim := unix.Rlimit{Cur: uint64(l.FileSize), Max: uint64(l.FileSize)}
		if e := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); e != nil {
			err = errors.Join(err, fmt.Errorf("file size limit: %w", e))
		}
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
