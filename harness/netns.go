package harness

// Private network namespaces for tests and benchmarks that multicast.
//
// mDNS must never run in the machine's root network namespace: its
// multicast route leaves through the real network card. A test that needs
// mDNS therefore runs inside a network namespace of its own, made with
// `unshare --net`, whose only interface is loopback and whose multicast
// route (224.0.0.0/4) is pinned to it:
//
//	func TestMain(m *testing.M) { os.Exit(harness.MainInNetns(m)) }
//
//	func TestFindsPeers(t *testing.T) {
//		harness.RequirePrivateNetns(t)
//		...
//	}
//
// MainInNetns re-executes the test binary inside a fresh namespace (the
// child is marked with P2PC_NETNS=1 and runs the tests; the parent only
// relays its exit code). Where no namespace can be made (not root, no
// unshare, not Linux) the tests run in place and RequirePrivateNetns skips
// the ones that multicast, saying why. Processes the tests start inherit
// the namespace, so several real p2pc processes can find each other there.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

const (
	// NetnsEnv marks a process started inside a private network namespace
	// by NetnsCommand (value "1").
	NetnsEnv = "P2PC_NETNS"
	// NetnsParentEnv carries the network namespace of the process that
	// made the private one (as /proc/self/ns/net reads there), so the child
	// can prove it is somewhere else.
	NetnsParentEnv = "P2PC_NETNS_PARENT"
)

// initNetNS is what /proc/self/ns/net reads in the kernel's initial network
// namespace on Linux 6.x, which gives it a fixed inode (PROC_NET_INIT_INO,
// 0xEFFFFFF9). Older kernels number it dynamically, from 0xF0000000 up, so
// the value can never name another namespace: seeing it is proof of being
// in the root namespace, not seeing it proves nothing.
const initNetNS = "net:[4026531833]"

// netnsScript sets up the namespace and then becomes the command:
// $1 is the ip binary, the rest the command line.
const netnsScript = `ip="$1"; shift
"$ip" link set lo up && "$ip" route add 224.0.0.0/4 dev lo && exec "$@"`

var (
	netnsOnce sync.Once
	netnsErr  error

	// skipReason says why this process runs its tests outside a private
	// namespace; set by MainInNetns.
	skipMu     sync.Mutex
	skipReason string
)

// NetnsAvailable reports whether this process can make private network
// namespaces (Linux, root or CAP_SYS_ADMIN, unshare and ip installed),
// trying it once.
func NetnsAvailable() error {
	netnsOnce.Do(func() {
		netnsErr = probeNetns()
	})
	return netnsErr
}

func probeNetns() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("network namespaces need Linux, this is %s", runtime.GOOS)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return fmt.Errorf("unshare not found (Debian package util-linux): %w", err)
	}
	if _, err := ipPath(); err != nil {
		return err
	}
	if _, err := netnsID(); err != nil {
		return err
	}
	cmd := NetnsCommand("true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if os.Geteuid() != 0 {
			msg += " (unshare --net needs root or CAP_SYS_ADMIN)"
		}
		return fmt.Errorf("unshare --net: %w: %s", err, msg)
	}
	return nil
}

// ipPath finds the ip binary, also in the sbin folders a non-root PATH
// may lack.
func ipPath() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("ip not found (Debian package iproute2)")
}

// netnsID names the network namespace of this process.
func netnsID() (string, error) {
	id, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return "", fmt.Errorf("read own network namespace: %w", err)
	}
	return id, nil
}

// NetnsCommand returns a command that runs args inside a new private
// network namespace: loopback up, the IPv4 multicast route on loopback,
// NetnsEnv and NetnsParentEnv set, the rest of the environment inherited.
// The process is killed if this one dies. Everything it starts shares the
// namespace; nothing in it can reach the machine's network.
func NetnsCommand(args ...string) *exec.Cmd {
	return NetnsCommandContext(context.Background(), args...)
}

// NetnsCommandContext is NetnsCommand with the process killed when ctx
// ends.
func NetnsCommandContext(ctx context.Context, args ...string) *exec.Cmd {
	ip, err := ipPath()
	if err != nil {
		ip = "ip" // the script fails with a clear "not found"
	}
	full := append([]string{"--net", "--", "sh", "-c", netnsScript, "sh", ip}, args...)
	cmd := exec.CommandContext(ctx, "unshare", full...)
	parent, _ := netnsID()
	cmd.Env = append(os.Environ(), NetnsEnv+"=1", NetnsParentEnv+"="+parent)
	cmd.SysProcAttr = sysProcAttr(false) // stays in the caller's process group (Ctrl-C reaches it)
	return cmd
}

// InPrivateNetns reports whether this process is provably outside the
// machine's root network namespace: its namespace differs from that of the
// process that made it (NetnsParentEnv) or of PID 1, and is not the
// kernel's initial one. Where nothing can be compared (PID 1's namespace
// unreadable, no parent recorded) it answers false.
func InPrivateNetns() bool {
	self, err := netnsID()
	if err != nil || self == initNetNS {
		return false
	}
	differs := false
	for _, ref := range []string{os.Getenv(NetnsParentEnv), readlinkQuiet("/proc/1/ns/net")} {
		if ref == "" {
			continue
		}
		if ref == self {
			return false
		}
		differs = true
	}
	return differs
}

func readlinkQuiet(path string) string {
	s, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return s
}

// RequirePrivateNetns skips the test unless it runs inside a private
// network namespace made by NetnsCommand (as MainInNetns does). Call it
// first in every test that multicasts (mDNS).
func RequirePrivateNetns(t testing.TB) {
	t.Helper()
	if os.Getenv(NetnsEnv) != "1" {
		skipMu.Lock()
		why := skipReason
		skipMu.Unlock()
		if why == "" {
			why = "the test binary was not re-executed in one: its TestMain must call harness.MainInNetns"
		}
		t.Skipf("needs a private network namespace (mDNS must never run in the machine's root namespace): %s", why)
	}
	if !InPrivateNetns() {
		self, _ := netnsID()
		t.Skipf("%s=1 is set but the network namespace %s is not provably private (parent %q): refusing to multicast",
			NetnsEnv, self, os.Getenv(NetnsParentEnv))
	}
}

// MainInNetns runs the tests of m inside a private network namespace and
// returns the exit code for os.Exit. Outside one it re-executes the test
// binary, with the same arguments, under NetnsCommand and returns the
// child's exit code; inside one (NetnsEnv set) it runs m.Run. If no
// namespace can be made it runs m.Run in place, prints why, and the tests
// that call RequirePrivateNetns skip.
func MainInNetns(m *testing.M) int {
	if os.Getenv(NetnsEnv) == "1" {
		return m.Run()
	}
	if err := NetnsAvailable(); err != nil {
		skipMu.Lock()
		skipReason = err.Error()
		skipMu.Unlock()
		fmt.Fprintf(os.Stderr, "harness: no private network namespace (%v); tests that need one will skip\n", err)
		return m.Run()
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: find the test binary: %v\n", err)
		return 1
	}
	cmd := NetnsCommand(append([]string{bin}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if code := ee.ExitCode(); code > 0 {
				return code
			}
			fmt.Fprintf(os.Stderr, "harness: test binary in network namespace: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "harness: run test binary in network namespace: %v\n", err)
		return 1
	}
	return 0
}
