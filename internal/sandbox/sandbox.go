package sandbox

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// Policy is what one confined process (and everything it starts) may
// touch besides the system's shared files (SystemReadOnly, SystemDevices).
type Policy struct {
	// ReadOnly files and folders may be read and executed.
	ReadOnly []string
	// ReadWrite folders may be read, written, created in and removed from.
	ReadWrite []string
	// Devices are device files the process may read and write besides
	// SystemDevices: a GPU slot's own GPU and the driver's control nodes
	// (package taskrun's BindGPU). Grant does not open them to User.
	Devices []string
	// Network lets the process use the network as the host does. Without
	// it the process runs in a private network namespace (when the host
	// may make one) and Landlock refuses TCP bind and connect (ABI >= 4).
	Network bool
	// User is the account the process runs as when the host runs as
	// root (TaskUser); nil: the host's own. Grant opens the paths above
	// to it.
	User *User
	// Clone3: the host forks the process with clone3 (Go does so for
	// SysProcAttr.UseCgroupFD, cgroup v2's CLONE_INTO_CGROUP), so the
	// seccomp filter must let clone3 through: the task may then make
	// namespaces with clone3, which the filter cannot inspect (unshare,
	// setns and clone with namespace flags stay refused).
	Clone3 bool
}

// Status says which confinements this machine gives a task process.
type Status struct {
	// LandlockABI is the kernel's Landlock ABI version, 0 if it has none
	// (files are then not confined).
	LandlockABI int
	// NetNS: tasks without network run in a private network namespace.
	NetNS bool
	// Seccomp: a deny list of system calls (ptrace, mount, bpf, ...)
	// answers EPERM to tasks.
	Seccomp bool
	// User is the account tasks run as, "name(uid)"; "" if not known.
	User string
	// OwnUser: tasks run as the host's own user (a host not run as root).
	OwnUser bool
	// Disabled: confinement was switched off (tests only).
	Disabled bool
}

// Files reports whether file access is confined (Landlock).
func (s Status) Files() bool { return !s.Disabled && s.LandlockABI >= 1 }

// Network names how a task without network is kept off it: "netns"
// (a private network namespace: no interface at all), "tcp" (Landlock
// refuses TCP bind and connect; UDP stays open), or "none".
func (s Status) Network() string {
	switch {
	case s.Disabled:
		return "none"
	case s.NetNS:
		return "netns"
	case s.LandlockABI >= 4:
		return "tcp"
	}
	return "none"
}

// String is the one-line summary p2pc join prints, e.g.
// "files=landlock-v7 network=netns syscalls=seccomp".
func (s Status) String() string {
	if s.Disabled {
		return "off (test switch)"
	}
	var b strings.Builder
	b.WriteString("files=")
	if s.Files() {
		b.WriteString("landlock-v" + strconv.Itoa(s.LandlockABI))
	} else {
		b.WriteString("none")
	}
	b.WriteString(" network=" + s.Network())
	if s.Seccomp {
		b.WriteString(" syscalls=seccomp")
	} else {
		b.WriteString(" syscalls=all")
	}
	switch {
	case s.User == "":
	case s.OwnUser:
		b.WriteString(" user=own:" + s.User)
	default:
		b.WriteString(" user=" + s.User)
	}
	return b.String()
}

// WithUser is s with the account tasks run as: u, or the host's own
// when u is nil.
func (s Status) WithUser(u *User) Status {
	if s.Disabled {
		return s
	}
	if u == nil || u.UID == uint32(os.Geteuid()) {
		s.User, s.OwnUser = hostUser(), true
	} else {
		s.User, s.OwnUser = u.String(), false
	}
	return s
}

var disabled struct {
	sync.Mutex
	on bool
}

// DisableForTest switches confinement off in this process until the
// returned function is called: the hostile-plugin suite uses it to show
// that each behaviour it blocks is a real attack. Not a user setting.
func DisableForTest() (restore func()) {
	disabled.Lock()
	disabled.on = true
	disabled.Unlock()
	return func() {
		disabled.Lock()
		disabled.on = false
		disabled.Unlock()
	}
}

func isDisabled() bool {
	disabled.Lock()
	defer disabled.Unlock()
	return disabled.on
}

// SystemReadOnly are the shared files every task may read and execute:
// libraries, tools, and the few files of /etc that programs read at
// start (not /etc as a whole: /etc/shadow, ssh keys, ...). Those missing
// on a machine are skipped.
var SystemReadOnly = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/opt",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf",
	"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/protocols", "/etc/services",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/alternatives",
	"/etc/mime.types", "/etc/os-release", "/etc/debian_version",
	"/etc/magic", "/etc/locale.alias", "/etc/environment",
	// not /proc: it shows other processes (their environment, as the
	// same user) and Landlock cannot name "this process only" there.
	"/sys/kernel/mm/transparent_hugepage", "/sys/devices/system/cpu",
	"/dev/urandom", "/dev/random",
}

// SystemDevices are the device files every task may read and write.
var SystemDevices = []string{"/dev/null", "/dev/zero", "/dev/full"}
