//go:build linux

package pluginhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The hostile-plugin suite: each test runs one attack as a task of a real
// plugin process through a Pool, twice — confined (the attack must fail,
// the task be reported failed, and the same pool serve the next task) and
// with confinement switched off (the attack must succeed: it is a real
// attack, not a test that cannot fail).

// attack runs in the plugin process: it does what name says to arg and
// returns what it got, or the error that stopped it.
func attack(name, arg string) (*sdk.Result, error) {
	ok := func(s string) (*sdk.Result, error) { return &sdk.Result{Data: []byte(s)}, nil }
	switch name {
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		return ok(fmt.Sprintf("read %d bytes", len(b)))
	case "write":
		if err := os.WriteFile(arg, []byte("pwned"), 0o644); err != nil {
			return nil, err
		}
		return ok("wrote " + arg)
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err != nil {
			return nil, err
		}
		c.Write([]byte("pwned"))
		c.Close()
		return ok("connected to " + arg)
	case "udp":
		c, err := net.Dial("udp", arg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if _, err := c.Write([]byte("pwned")); err != nil {
			return nil, err
		}
		return ok("sent to " + arg)
	case "ptrace":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return nil, err
		}
		runtime.LockOSThread() // ptrace belongs to a thread
		defer runtime.UnlockOSThread()
		if err := unix.PtraceAttach(pid); err != nil {
			return nil, fmt.Errorf("ptrace attach %d: %w", pid, err)
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		unix.PtraceDetach(pid)
		return ok("traced " + arg)
	case "limits":
		var core, files, as, fsize, nproc unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_CORE, &core)
		unix.Getrlimit(unix.RLIMIT_NOFILE, &files)
		unix.Getrlimit(unix.RLIMIT_AS, &as)
		unix.Getrlimit(unix.RLIMIT_FSIZE, &fsize)
		unix.Getrlimit(unix.RLIMIT_NPROC, &nproc)
		return ok(fmt.Sprintf("core %d nofile %d as %d fsize %d nproc %d", core.Max, files.Max, int64(as.Max), int64(fsize.Max), int64(nproc.Max)))
	case "environ":
		b, err := os.ReadFile(filepath.Join("/proc", arg, "environ"))
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errors.New("empty environment")
		}
		return ok(fmt.Sprintf("read %d bytes of environment", len(b)))
	}
	return moreAttacks(name, arg)
}

// hostile runs attack name on arg in a fresh pool, confined or not, and
// returns the task's error. A confined pool must then serve an echo task.
// A confined pool of a test run as root runs its tasks as nobody, as a
// peer run as root does; policy, if set, adds to the pool's policy.
func hostile(t *testing.T, confined bool, name, arg string, policy ...func(*sandbox.Policy)) error {
	t.Helper()
	if !confined {
		t.Cleanup(sandbox.DisableForTest())
	}
	cfg, _ := testConfig(t, "task")
	if os.Geteuid() == 0 {
		u, err := sandbox.TaskUser("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandbox.User = u
	}
	for _, p := range policy {
		p(&cfg.Sandbox)
	}
	pl := NewPool(cfg, 1)
	t.Cleanup(func() { pl.Close() })
	_, err := pl.Run(t.Context(), req("attack", params{Op: "attack", Msg: name, Arg: arg}), newTestHost(), 20*time.Second)
	res, err2 := pl.Run(t.Context(), req("next", params{Op: "echo", Msg: "still here"}), newTestHost(), 20*time.Second)
	if err2 != nil || string(res.Data) != "still here" {
		t.Fatalf("the pool did not serve the task after the attack: %v", err2)
	}
	return err
}

// attackCase runs attack name against arg confined (must fail) and not
// (must succeed); check, if set, looks for the attack's effect after the
// unconfined run and its absence after the confined one.
func attackCase(t *testing.T, name string, arg func(t *testing.T) string, effect func(t *testing.T) bool, policy ...func(*sandbox.Policy)) {
	if st := sandbox.Probe(); !st.Files() {
		t.Skipf("no Landlock here (%s)", st)
	}
	t.Run("confined", func(t *testing.T) {
		a := arg(t)
		err := hostile(t, true, name, a, policy...)
		var te *sdk.TaskError
		if err == nil {
			t.Fatalf("attack %s %s succeeded under confinement", name, a)
		}
		if !errors.As(err, &te) {
			t.Logf("attack failed with a non-task error (acceptable): %v", err)
		}
		t.Logf("blocked: %v", err)
		if effect != nil && effect(t) {
			t.Fatalf("attack %s %s had its effect under confinement", name, a)
		}
		record(t, true, err.Error())
	})
	t.Run("unconfined", func(t *testing.T) {
		a := arg(t)
		if err := hostile(t, false, name, a, policy...); err != nil {
			t.Fatalf("attack %s %s failed without confinement (not a real attack?): %v", name, a, err)
		}
		if effect != nil && !effect(t) {
			t.Fatalf("attack %s %s had no effect without confinement", name, a)
		}
		record(t, false, "succeeded")
	})
}

func secretFile(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHostileReadHomeSecret(t *testing.T) {
	attackCase(t, "read", func(t *testing.T) string {
		return secretFile(t, filepath.Join(t.TempDir(), "home", ".ssh"), "id_ed25519")
	}, nil)
}

func TestHostileReadShadow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("/etc/shadow is unreadable without root anyway")
	}
	attackCase(t, "read", func(*testing.T) string { return "/etc/shadow" }, nil)
}

func TestHostileReadBlockStore(t *testing.T) {
	attackCase(t, "read", func(t *testing.T) string {
		return secretFile(t, filepath.Join(t.TempDir(), "data", "store", "ab"), "abcdef")
	}, nil)
}

func TestHostileReadOtherPool(t *testing.T) {
	attackCase(t, "read", func(t *testing.T) string {
		other, _ := newTestPool(t, 1)
		if _, err := other.Run(t.Context(), req("x", params{Op: "echo"}), newTestHost(), 0); err != nil {
			t.Fatal(err)
		}
		return secretFile(t, filepath.Join(other.privateRoot(), "work"), "input")
	}, nil)
}

func TestHostileWriteParent(t *testing.T) {
	// The plugin's working folder is ROOT/work of its pool: ../ is the
	// pool's root, which holds its lock.
	attackCase(t, "write", func(*testing.T) string { return "../escaped" }, nil)
}

func TestHostileWriteAbsolute(t *testing.T) {
	var target string
	attackCase(t, "write", func(t *testing.T) string {
		target = filepath.Join(t.TempDir(), "bashrc")
		return target
	}, func(*testing.T) bool {
		_, err := os.Stat(target)
		return err == nil
	})
}

func TestHostileTCPConnect(t *testing.T) {
	var got chan struct{}
	attackCase(t, "tcp", func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		got = make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				got <- struct{}{}
				c.Close()
			}
		}()
		return ln.Addr().String()
	}, func(*testing.T) bool {
		select {
		case <-got:
			return true
		default:
			return false
		}
	})
}

func TestHostileUDPSend(t *testing.T) {
	if sandbox.Probe().Network() != "netns" {
		t.Skip("UDP is blocked by the private network namespace only (needs root); Landlock ABI 7 confines TCP only")
	}
	var pc net.PacketConn
	attackCase(t, "udp", func(t *testing.T) string {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		return pc.LocalAddr().String()
	}, func(*testing.T) bool {
		pc.SetReadDeadline(time.Now().Add(time.Second)) // the datagram was sent before the task returned
		n, _, err := pc.ReadFrom(make([]byte, 16))
		return err == nil && n > 0
	})
}

func TestHostilePtrace(t *testing.T) {
	attackCase(t, "ptrace", func(t *testing.T) string {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return strconv.Itoa(c.Process.Pid)
	}, nil)
}

func TestHostileReadHostEnvironment(t *testing.T) {
	attackCase(t, "environ", func(*testing.T) string { return strconv.Itoa(os.Getpid()) }, nil)
}

// TestConfinedPluginWorks: a confined plugin still reads its private
// folders and the files the policy names, and writes its work folder.
func TestConfinedPluginWorks(t *testing.T) {
	if st := sandbox.Probe(); !st.Files() {
		t.Skipf("no Landlock here (%s)", st)
	}
	in := secretFile(t, filepath.Join(t.TempDir(), "inputs"), "in.txt")
	cfg, _ := testConfig(t, "task")
	cfg.Sandbox.ReadOnly = []string{filepath.Dir(in)}
	pl := NewPool(cfg, 1)
	t.Cleanup(func() { pl.Close() })
	for _, c := range []params{
		{Op: "attack", Msg: "read", Arg: in},
		{Op: "attack", Msg: "write", Arg: "out.txt"},
		{Op: "attack", Msg: "read", Arg: "out.txt"},
		{Op: "attack", Msg: "read", Arg: "/etc/passwd"},
	} {
		if _, err := pl.Run(t.Context(), req("ok", c), newTestHost(), 20*time.Second); err != nil {
			t.Errorf("%s %s: %v", c.Msg, c.Arg, err)
		}
	}
	if err := hostileWrite(t, pl, in); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("writing a read-only input: got %v, want permission denied", err)
	}
	res, err := pl.Run(t.Context(), req("l", params{Op: "attack", Msg: "limits"}), newTestHost(), 20*time.Second)
	var core, files uint64
	if err != nil {
		t.Errorf("limits: %v", err)
	} else if _, err := fmt.Sscanf(string(res.Data), "core %d nofile %d", &core, &files); err != nil || core != 0 || files > sandbox.MaxOpenFiles {
		t.Errorf("limits: %q (%v), want core 0 and nofile at most %d", res.Data, err, sandbox.MaxOpenFiles)
	}
	if st := pl.Confinement(); !st.Files() {
		t.Errorf("Confinement() = %s, want files confined", st)
	}
}

func hostileWrite(t *testing.T, pl *Pool, path string) error {
	_, err := pl.Run(t.Context(), req("w", params{Op: "attack", Msg: "write", Arg: path}), newTestHost(), 20*time.Second)
	return err
}
