//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// runFilter runs the deny list in x/net/bpf's interpreter on one system
// call. The interpreter loads words big-endian, the kernel native-endian:
// the call is written big-endian so that both load the same numbers.
func runFilter(t *testing.T, arch uint32, nr uintptr, arg0 uint32) uint32 {
	return runFilterClone3(t, arch, nr, arg0, false)
}

func runFilterClone3(t *testing.T, arch uint32, nr uintptr, arg0 uint32, clone3 bool) uint32 {
	t.Helper()
	var insns []bpf.Instruction
	for _, f := range filter(auditArch, x32ABI, append(deniedSyscalls, deniedArch...), clone3) {
		insns = append(insns, bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble())
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("filter does not assemble: %v", err)
	}
	data := make([]byte, 64) // struct seccomp_data
	binary.BigEndian.PutUint32(data[offNR:], uint32(nr))
	binary.BigEndian.PutUint32(data[offArch:], arch)
	binary.BigEndian.PutUint32(data[offArg0:], arg0)
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(ret)
}

func TestFilter(t *testing.T) {
	for _, tt := range []struct {
		name string
		arch uint32
		nr   uintptr
		arg0 uint32
		want uint32
	}{
		{"read", auditArch, unix.SYS_READ, 0, allow},
		{"openat", auditArch, unix.SYS_OPENAT, 0, allow},
		{"execve", auditArch, unix.SYS_EXECVE, 0, allow},
		{"ptrace", auditArch, unix.SYS_PTRACE, 0, eperm},
		{"process_vm_readv", auditArch, unix.SYS_PROCESS_VM_READV, 0, eperm},
		{"mount", auditArch, unix.SYS_MOUNT, 0, eperm},
		{"bpf", auditArch, unix.SYS_BPF, 0, eperm},
		{"keyctl", auditArch, unix.SYS_KEYCTL, 0, eperm},
		{"finit_module", auditArch, unix.SYS_FINIT_MODULE, 0, eperm},
		{"reboot", auditArch, unix.SYS_REBOOT, 0, eperm},
		{"unshare", auditArch, unix.SYS_UNSHARE, unix.CLONE_NEWUSER, eperm},
		{"setns", auditArch, unix.SYS_SETNS, 0, eperm},
		{"io_uring_setup", auditArch, unix.SYS_IO_URING_SETUP, 0, eperm},
		{"last of the list", auditArch, deniedSyscalls[len(deniedSyscalls)-1], 0, eperm},
		{"clone a thread", auditArch, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, allow},
		{"clone a process", auditArch, unix.SYS_CLONE, unix.CLONE_VFORK | unix.CLONE_VM | uint32(unix.SIGCHLD), allow},
		{"clone a user namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint32(unix.SIGCHLD), eperm},
		{"clone a network namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWNET, eperm},
		{"clone3", auditArch, unix.SYS_CLONE3, 0, enosys},
		{"personality query", auditArch, unix.SYS_PERSONALITY, 0xffffffff, allow},
		{"personality linux", auditArch, unix.SYS_PERSONALITY, 0, allow},
		{"personality no ASLR", auditArch, unix.SYS_PERSONALITY, addrNoRandomize, eperm},
		{"another ABI", 0x40000003 /* AUDIT_ARCH_I386 */, unix.SYS_READ, 0, eperm},
	} {
		if got := runFilter(t, tt.arch, tt.nr, tt.arg0); got != tt.want {
			t.Errorf("%s: filter answers %#x, want %#x", tt.name, got, tt.want)
		}
	}
	// Policy.Clone3: clone3 passes, the rest of the list holds.
	if got := runFilterClone3(t, auditArch, unix.SYS_CLONE3, 0, true); got != allow {
		t.Errorf("clone3 with Policy.Clone3: filter answers %#x, want allow", got)
	}
	if got := runFilterClone3(t, auditArch, unix.SYS_UNSHARE, 0, true); got != eperm {
		t.Errorf("unshare with Policy.Clone3: filter answers %#x, want EPERM", got)
	}
	if x32ABI {
		if got := runFilter(t, auditArch, x32SyscallBit|unix.SYS_READ, 0); got != eperm {
			t.Errorf("x32 read: filter answers %#x, want EPERM", got)
		}
	}
}

// TestSeccompThread installs the filter on one locked thread of the test
// process: the denied calls fail with EPERM there, the others work, and
// the rest of the process is untouched.
func TestSeccompThread(t *testing.T) {
	if !Probe().Seccomp {
		t.Skip("no seccomp filters here")
	}
	type result struct{ install, keyctl, persona, query, uts error }
	keyctl := func() error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0, 0)
		return err
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		if r.install = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); r.install == nil {
			r.install = installSeccomp(false)
		}
		r.keyctl = keyctl()
		_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
		r.persona = errnoErr(e)
		_, _, e = unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
		r.query = errnoErr(e)
		r.uts = unix.Unshare(unix.CLONE_NEWUTS)
		done <- r
	}()
	r := <-done
	if r.install != nil {
		t.Fatal(r.install)
	}
	for name, err := range map[string]error{"keyctl": r.keyctl, "personality(ADDR_NO_RANDOMIZE)": r.persona, "unshare": r.uts} {
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("%s on the filtered thread: %v, want EPERM", name, err)
		}
	}
	if r.query != nil {
		t.Errorf("personality query on the filtered thread: %v", r.query)
	}
	if err := keyctl(); errors.Is(err, unix.EPERM) {
		t.Errorf("keyctl outside the filtered thread: %v: the filter leaked to the process", err)
	}
}

// addrNoRandomize is the personality flag ADDR_NO_RANDOMIZE.
const addrNoRandomize = 0x0040000

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// BenchmarkSyscall: the cost the seccomp filter adds to every system
// call a task makes (a cheap one, getppid, on a thread with and without
// the filter; each sub-benchmark runs on a thread of its own, which the
// filter then poisons for good).
func BenchmarkSyscall(b *testing.B) {
	for _, filtered := range []bool{false, true} {
		name := "plain"
		if filtered {
			name = "seccomp"
		}
		b.Run(name, func(b *testing.B) {
			done := make(chan error, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
				if filtered {
					if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
						done <- err
						return
					}
					if err := installSeccomp(false); err != nil {
						done <- err
						return
					}
				}
				for b.Loop() {
					unix.Getppid()
				}
				done <- nil
			}()
			if err := <-done; err != nil {
				b.Skip(err)
			}
		})
	}
}
