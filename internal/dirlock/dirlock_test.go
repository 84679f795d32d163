package dirlock

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a folder owner in another process:
// with DIRLOCK_TEST_MAKE=parent it makes a folder there, prints its path
// and holds it until its stdin closes.
func TestMain(m *testing.M) {
	if parent := os.Getenv("DIRLOCK_TEST_MAKE"); parent != "" {
		d, err := Make(parent, "owned-")
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(d.Path + "\n")
		io.Copy(io.Discard, os.Stdin) // hold the folder until stdin closes or a kill
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startOwner starts a process that makes a folder in parent and holds it.
func startOwner(t *testing.T, parent string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRLOCK_TEST_MAKE="+parent)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("owner process: no folder: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

func needFlock(t *testing.T) {
	if !haveFlock {
		t.Skip("no flock on this system")
	}
}

func TestSweepLeavesHeldAndRemovesOrphaned(t *testing.T) {
	needFlock(t)
	parent := t.TempDir()
	mine, err := Make(parent, "owned-")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Remove()
	if _, err := os.Stat(filepath.Join(mine.Path, FileName)); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	// A folder whose owner closed its lock without removing the folder
	// (what the kernel does for a process that dies).
	gone, err := Make(parent, "owned-")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(gone.Path, "data"), []byte("x"), 0o600)
	gone.f.Close()

	removed, err := Sweep(parent, "owned-")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != gone.Path {
		t.Fatalf("removed %v, want only %s", removed, gone.Path)
	}
	if _, err := os.Stat(mine.Path); err != nil {
		t.Fatalf("held folder swept: %v", err)
	}
	if err := mine.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove left %s: %v", mine.Path, err)
	}
}

func TestSweepOtherProcess(t *testing.T) {
	needFlock(t)
	parent := t.TempDir()
	live, liveDir := startOwner(t, parent)
	dead, deadDir := startOwner(t, parent)
	_ = live
	if err := dead.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.Wait()

	removed, err := Sweep(parent, "owned-")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != deadDir {
		t.Fatalf("removed %v, want only %s (the killed owner's)", removed, deadDir)
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Fatalf("live owner's folder swept: %v", err)
	}
}

func TestSweepNames(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		want         bool
	}{
		{"owned-ab12", "owned-", true},
		{".owned-ab12.staging", "owned-", true},
		{"other-ab12", "owned-", false},
		{".owned-ab12", "owned-", false},
		{"12-ab", "", true},
		{".ab.staging", "", true},
		{".hidden", "", false},
	} {
		if got := sweepable(tc.name, tc.prefix); got != tc.want {
			t.Errorf("sweepable(%q, %q) = %v, want %v", tc.name, tc.prefix, got, tc.want)
		}
	}
}

func TestSweepStagingAndLegacy(t *testing.T) {
	needFlock(t)
	parent := t.TempDir()
	mk := func(name string, lock bool, age time.Duration) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if lock {
			os.WriteFile(filepath.Join(dir, FileName), nil, 0o600)
		}
		old := time.Now().Add(-age)
		os.Chtimes(dir, old, old)
		return dir
	}
	youngStaging := mk(".owned-1.staging", true, 0)
	oldStaging := mk(".owned-2.staging", true, 2*stagingAge)
	youngLegacy := mk("owned-3", false, time.Hour)
	oldLegacy := mk("owned-4", false, LegacyAge+time.Hour)
	notOurs := mk("unrelated", false, LegacyAge+time.Hour)

	removed, err := Sweep(parent, "owned-")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range removed {
		got[d] = true
	}
	for dir, want := range map[string]bool{youngStaging: false, oldStaging: true, youngLegacy: false, oldLegacy: true, notOurs: false} {
		if got[dir] != want {
			t.Errorf("%s: removed %v, want %v", filepath.Base(dir), got[dir], want)
		}
	}
}

// TestMakeNeverShowsUnlocked: while Make runs in a loop, every folder with
// a final name that a concurrent reader sees has its lock held.
func TestMakeNeverShowsUnlocked(t *testing.T) {
	needFlock(t)
	parent := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			d, err := Make(parent, "owned-")
			if err != nil {
				t.Error(err)
				return
			}
			d.Remove()
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		removed, err := Sweep(parent, "owned-")
		if len(removed) > 0 {
			t.Fatalf("swept live folders %v (err %v)", removed, err)
		}
	}
}

func TestAcquire(t *testing.T) {
	needFlock(t)
	path := filepath.Join(t.TempDir(), "out.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: %v, want a *HeldError", err)
	}
	if held.Owner.PID != os.Getpid() || held.Owner.Host == "" || held.Owner.Start.IsZero() {
		t.Fatalf("owner %+v, want this process", held.Owner)
	}
	if !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("error %q does not name the owner", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Release left the lock file: %v", err)
	}
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}
