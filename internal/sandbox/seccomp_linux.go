//go:build linux && (amd64 || arm64)

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp deny list. A task process and everything it starts runs
// under a filter that answers EPERM (the process is not killed: a program
// that probes for a feature goes on without it) to the system calls no
// task needs and that reach past the task: other processes' memory
// (ptrace, process_vm_*, pidfd_getfd), the machine itself (mount and the
// new mount API, pivot_root, chroot, kexec, modules, reboot, swap, acct,
// quotas, clocks, I/O ports), kernel attack surface a task has no use for
// (bpf, perf_event_open, userfaultfd, io_uring, keyrings, file handles),
// new namespaces (unshare, setns, clone with CLONE_NEW* flags; clone3,
// whose flags a filter cannot read, answers ENOSYS so that C libraries
// fall back to clone), and personality flags other than the plain ones
// (ADDR_NO_RANDOMIZE would switch off address randomisation).
//
// A system call of another architecture (the 32-bit x86 ABI on amd64,
// the x32 ABI) is refused whole: its numbers differ, so a deny list of
// amd64 numbers would not stop it.

// deniedSyscalls are refused with EPERM (with deniedArch).
var deniedSyscalls = []uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_SYSLOG, unix.SYS_VHANGUP,
}

// x32SyscallBit marks a system call of the x32 ABI.
const x32SyscallBit = 0x40000000

// namespaceFlags are the clone flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// allowedPersonas are the personality(2) arguments a task may pass: the
// query (0xffffffff) and the plain Linux personas (Docker's default list).
var allowedPersonas = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Offsets in struct seccomp_data: nr, arch, instruction pointer, args.
const (
	offNR   = 0
	offArch = 4
	offArg0 = 16 // the low 32 bits on a little-endian machine (amd64, arm64)
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	retK   = unix.BPF_RET | unix.BPF_K
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// filter is the deny list as a classic BPF program for architecture
// arch (an AUDIT_ARCH_* value). It jumps at most a few instructions
// ahead, so it needs no jump table.
func filter(arch uint32, x32 bool, denied []uintptr, clone3 bool) []unix.SockFilter {
	prog := []unix.SockFilter{
		stmt(ldAbs, offArch),
		jump(jeq, arch, 1, 0),
		stmt(retK, eperm), // another ABI: refused whole
		stmt(ldAbs, offNR),
	}
	if x32 {
		prog = append(prog, jump(jge, x32SyscallBit, 0, 1), stmt(retK, eperm))
	}
	for _, nr := range denied {
		prog = append(prog, jump(jeq, uint32(nr), 0, 1), stmt(retK, eperm))
	}
	if !clone3 {
		prog = append(prog, jump(jeq, unix.SYS_CLONE3, 0, 1), stmt(retK, enosys))
	}
	// clone: refused when its flags (argument 0 on amd64 and arm64) ask
	// for a new namespace.
	prog = append(prog,
		jump(jeq, unix.SYS_CLONE, 0, 4),
		stmt(ldAbs, offArg0),
		jump(jset, namespaceFlags, 0, 1),
		stmt(retK, eperm),
		stmt(retK, allow),
	)
	// personality: only the allowed personas.
	n := len(allowedPersonas)
	prog = append(prog, jump(jeq, unix.SYS_PERSONALITY, 0, uint8(n+3)), stmt(ldAbs, offArg0))
	for i, p := range allowedPersonas {
		prog = append(prog, jump(jeq, p, uint8(n-i), 0))
	}
	return append(prog, stmt(retK, eperm), stmt(retK, allow), stmt(retK, allow))
}

// haveSeccomp reports whether the kernel has seccomp filters that can
// answer with an errno.
func haveSeccomp() bool {
	action := uint32(unix.SECCOMP_RET_ERRNO)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return errno == 0
}

// installSeccomp installs the deny list on the calling thread only (no
// TSYNC), so the processes it forks from now on inherit it; clone3 lets
// clone3 through (Policy.Clone3). The thread must have no_new_privs set.
func installSeccomp(clone3 bool) error {
	prog := filter(auditArch, x32ABI, append(deniedSyscalls, deniedArch...), clone3)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp filter: %w", errno)
	}
	return nil
}
