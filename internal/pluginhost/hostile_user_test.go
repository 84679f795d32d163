//go:build linux

package pluginhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// moreAttacks are the attacks of the seccomp filter and the task user
// (see attack).
func moreAttacks(name, arg string) (*sdk.Result, error) {
	ok := func(s string) (*sdk.Result, error) { return &sdk.Result{Data: []byte(s)}, nil }
	switch name {
	case "id":
		return ok(fmt.Sprintf("uid %d gid %d", os.Getuid(), os.Getgid()))
	case "rlimit": // core dumps back on: raise the core limit (Floor: 0)
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_CORE, &lim); err != nil {
			return nil, err
		}
		want := max(lim.Max, 1<<30)
		if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: want, Max: want}); err != nil {
			return nil, fmt.Errorf("raise core limit from %d to %d: %w", lim.Max, want, err)
		}
		return ok(fmt.Sprintf("core limit %d", want))
	case "setuid": // plant a set-user-ID-root executable
		if err := os.WriteFile(arg, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
			return nil, err
		}
		if err := unix.Chmod(arg, 0o4755); err != nil {
			return nil, fmt.Errorf("chmod u+s: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Stat(arg, &st); err != nil {
			return nil, err
		}
		if st.Mode&unix.S_ISUID == 0 || st.Uid != 0 {
			return nil, fmt.Errorf("%s is not set-user-ID root (mode %o, owner %d): harmless", arg, st.Mode, st.Uid)
		}
		return ok("made " + arg + " set-user-ID root")
	case "rewrite": // make a read-only file writable, as its owner may, and write it
		if err := os.Chmod(arg, 0o644); err != nil {
			return nil, fmt.Errorf("chmod u+w: %w", err)
		}
		if err := os.WriteFile(arg, []byte("pwned"), 0o644); err != nil {
			return nil, err
		}
		return ok("rewrote " + arg)
	case "userns": // a user namespace: root inside it, kernel attack surface
		out, err := exec.Command("unshare", "--user", "--map-root-user", "id", "-u").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("unshare --user: %w: %s", err, out)
		}
		return ok("uid in a new user namespace: " + string(out))
	case "keyctl":
		id, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
		if err != nil {
			return nil, fmt.Errorf("keyctl: %w", err)
		}
		return ok(fmt.Sprintf("user keyring %d", id))
	}
	return limitAttack(name, arg) // hostile_limits_test.go
}

// taskUser is the account the tests run tasks as: nobody, when the tests
// run as root (else they skip).
func taskUser(t *testing.T) *sandbox.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only a root host runs tasks as another user")
	}
	u, err := sandbox.TaskUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestTaskUser: a pool whose policy names a task user runs its processes
// as that user (never uid 0), which can still write its work folder and
// read the inputs and the executable the policy names, while files only
// root may read stay closed even where Landlock would allow them.
func TestTaskUser(t *testing.T) {
	u := taskUser(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "inputs", "in.txt")
	os.MkdirAll(filepath.Dir(in), 0o700)
	if err := os.WriteFile(in, []byte("input"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	rootOnly := filepath.Join(dir, "inputs", "root-only")
	os.WriteFile(rootOnly, []byte("x"), 0o600)

	cfg, _ := testConfig(t, "task")
	cfg.Sandbox = sandbox.Policy{ReadOnly: []string{in}, ReadWrite: []string{work}, User: u}
	pl := NewPool(cfg, 1)
	t.Cleanup(func() { pl.Close() })
	run := func(name, arg string) (string, error) {
		res, err := pl.Run(t.Context(), req(name, params{Op: "attack", Msg: name, Arg: arg}), newTestHost(), 20*time.Second)
		if err != nil {
			return "", err
		}
		return string(res.Data), nil
	}
	if got, err := run("id", ""); err != nil || got != fmt.Sprintf("uid %d gid %d", u.UID, u.GID) {
		t.Fatalf("id: %q %v, want uid %d", got, err, u.UID)
	}
	for _, c := range [][2]string{{"read", in}, {"write", filepath.Join(work, "out")}, {"write", filepath.Join(work, "sub")}} {
		if _, err := run(c[0], c[1]); err != nil {
			t.Errorf("%s %s as %s: %v", c[0], c[1], u, err)
		}
	}
	// Floor reached the task user's process (see sandbox.asOwnerOf).
	if got, err := run("limits", ""); err != nil || !strings.HasPrefix(got, "core 0 ") {
		t.Errorf("limits of the task user's process: %q %v, want core 0", got, err)
	}
	if _, err := run("read", rootOnly); err == nil {
		t.Errorf("read %s (mode 0600, not in the policy) as %s: succeeded", rootOnly, u)
	}
	if st := pl.Confinement(); st.User != u.String() || st.OwnUser || !strings.Contains(st.String(), "user="+u.String()) {
		t.Errorf("Confinement() = %s, want user=%s", st, u)
	}
}

func TestStatusOwnUser(t *testing.T) {
	st := sandbox.Status{LandlockABI: 7}.WithUser(nil)
	if !st.OwnUser || !strings.Contains(st.String(), "user=own:") {
		t.Errorf("no task user: %s, want user=own:…", st)
	}
}

func TestHostileUserNamespace(t *testing.T) {
	attackCase(t, "userns", func(*testing.T) string { return "" }, nil)
}

func TestHostileKeyring(t *testing.T) {
	attackCase(t, "keyctl", func(*testing.T) string { return "" }, nil)
}

func TestHostileRaiseLimits(t *testing.T) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_CORE, &lim); lim.Max == 0 {
		t.Skip("this host allows no core files either: nothing to raise back")
	}
	attackCase(t, "rlimit", func(*testing.T) string { return "" }, nil)
}

func TestHostileSetuidRoot(t *testing.T) {
	taskUser(t)
	dir := ""
	attackCase(t, "setuid", func(t *testing.T) string {
		dir = t.TempDir()
		os.Chmod(dir, 0o777) // the task user may write here: the test is of the file's owner
		return filepath.Join(dir, "rootshell")
	}, nil, func(p *sandbox.Policy) { p.ReadWrite = append(p.ReadWrite, dir) })
}

func TestHostileReadRootOnlyFile(t *testing.T) {
	taskUser(t)
	dir := ""
	attackCase(t, "read", func(t *testing.T) string {
		dir = t.TempDir()
		return secretFile(t, filepath.Join(dir, "shared"), "root-only")
	}, nil, func(p *sandbox.Policy) { p.ReadOnly = append(p.ReadOnly, filepath.Join(dir, "shared")) })
}

// jobInputs lays out two jobs' folders as a peer does (package node: a
// folder per job in its work folder, the inputs a private copy of mode
// 0444 in job/inputs) and returns the victim's input and the attacker's
// job folder.
func jobInputs(t *testing.T) (victim, attacker string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "data", "work", "1-x")
	victim = filepath.Join(work, "victim-1", "job", "inputs", "in")
	attacker = filepath.Join(work, "attacker-2", "job")
	for _, d := range []string{filepath.Dir(victim), filepath.Join(attacker, "inputs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(victim, []byte("honest input"), 0o444); err != nil {
		t.Fatal(err)
	}
	return victim, attacker
}

// The attacker's pool is confined as a peer confines a job's pool
// (node.taskPolicy): its own job's folder read-only.
func TestHostileReadOtherJobInput(t *testing.T) {
	var attacker string
	attackCase(t, "read", func(t *testing.T) string {
		var victim string
		victim, attacker = jobInputs(t)
		return victim
	}, nil, func(p *sandbox.Policy) { p.ReadOnly = append(p.ReadOnly, attacker) })
}

// Inputs are read-only, but a task running as the peer's own user (a peer
// not run as root) owns them and may change their mode first: only the
// confinement stops it.
func TestHostileRewriteOtherJobInput(t *testing.T) {
	var victim, attacker string
	attackCase(t, "rewrite", func(t *testing.T) string {
		victim, attacker = jobInputs(t)
		return victim
	}, func(t *testing.T) bool {
		b, err := os.ReadFile(victim)
		return err == nil && string(b) != "honest input"
	}, func(p *sandbox.Policy) { p.ReadOnly = append(p.ReadOnly, attacker) })
}
