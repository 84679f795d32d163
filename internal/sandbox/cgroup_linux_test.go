//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// startIn starts `sleep 60` confined to nothing special in cgroup c, as
// the plugin host does (from a thread locked for good), and returns it;
// the test's cleanup kills it.
func startIn(t *testing.T, c *Cgroup) *exec.Cmd {
	t.Helper()
	return startCmdIn(t, c, exec.Command("sleep", "60"))
}

// startCmdIn starts cmd as startIn does.
func startCmdIn(t *testing.T, c *Cgroup, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		_, err := StartConfined(cmd, NewConfinement(Policy{}), c, Limits{})
		done <- err
		if err == nil {
			cmd.Wait()
		}
	}()
	if err := <-done; err != nil {
		t.Fatalf("start in cgroup: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

func needTree(t *testing.T) {
	t.Helper()
	if st := Cgroups(); st.Version == 0 {
		t.Skipf("no cgroups here: %s", st)
	}
}

// TestCgroupLifetime: a process started in a cgroup is in it from the
// start, Kill ends it, Close removes the cgroup.
func TestCgroupLifetime(t *testing.T) {
	needTree(t)
	c, err := NewCgroup(Limits{Memory: 64 << 20, Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, c)
	if got := c.Procs(); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Fatalf("Procs = %v, want [%d] (the host must not stay in it)", got, cmd.Process.Pid)
	}
	if _, err := c.KillOthers(cmd.Process.Pid); err != nil || len(c.Procs()) != 1 {
		t.Fatalf("KillOthers(the only process) = %v, left %v", err, c.Procs())
	}
	if err := c.Exceeded(); err != nil {
		t.Errorf("Exceeded = %v with nothing exceeded", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Errorf("left after Close: %v", p)
	}
	for _, d := range folders(c.dirs) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Close (%v)", d, err)
		}
	}
}

// TestKillOthersAfterEachTask: KillOthers' quick check (the pids
// counter against the plugin's threads) sees a child left behind and a
// double-forked daemon, task after task, and lets the plugin be.
func TestKillOthersAfterEachTask(t *testing.T) {
	needTree(t)
	c, err := NewCgroup(Limits{Memory: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The "plugin": a shell that, per line, leaves a child ("c") or a
	// double-forked daemon ("d") or nothing ("n"), then answers.
	cmd := exec.Command("sh", "-c", `while read l; do case $l in c) sleep 60 & ;; d) (sleep 60 &) ;; esac; echo ok; done`)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	out := bufio.NewReader(outPipe)
	startCmdIn(t, c, cmd)
	plugin := cmd.Process.Pid
	task := func(what string) {
		t.Helper()
		if _, err := io.WriteString(in, what+"\n"); err != nil {
			t.Fatal(err)
		}
		if l, err := out.ReadString('\n'); err != nil || l != "ok\n" {
			t.Fatalf("task %q: answer %q, %v", what, l, err)
		}
	}
	for i, step := range []struct {
		task string
		left bool
	}{{"n", false}, {"n", false}, {"c", true}, {"n", false}, {"d", true}, {"d", true}, {"n", false}, {"c", true}} {
		task(step.task)
		left, err := c.KillOthers(plugin)
		if err != nil || left != step.left {
			t.Fatalf("step %d (%s): KillOthers = %v, %v; want %v", i, step.task, left, err, step.left)
		}
		if got := c.Procs(); !slices.Equal(got, []int{plugin}) {
			t.Fatalf("step %d (%s): left in the cgroup %v, want only the plugin %d", i, step.task, got, plugin)
		}
	}
}

// TestSweepCgroups: the tree of a p2pc process that is gone (its lock
// is free) is killed and removed; a tree whose lock is held is left.
func TestSweepCgroups(t *testing.T) {
	needTree(t)
	base := filepath.Dir(TreeDir("pids"))
	dead := filepath.Join(base, cgroupPrefix+"1-deadbeef")
	live := filepath.Join(base, cgroupPrefix+"2-alive")
	for _, d := range []string{filepath.Join(dead, "t1"), live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeCgroupDir(dead); removeCgroupDir(live) })
	lock, err := dirlock.Acquire(filepath.Join(cgroupLockDir, filepath.Base(live)+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	orphan := exec.Command("sleep", "60")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill() })
	if err := writeFile(filepath.Join(dead, "t1", "cgroup.procs"), strconv.Itoa(orphan.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if err := sweepCgroups(base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("dead tree still there (%v)", err)
	}
	if err := orphan.Wait(); err == nil {
		t.Error("the dead tree's process was not killed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live tree removed: %v", err)
	}
}

// TestCgroupV2 exercises the v2 path (clone into the cgroup, cgroup.kill)
// on the unified hierarchy, where this machine has one besides v1.
func TestCgroupV2(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	self, _ := os.ReadFile("/proc/self/cgroup")
	_, v2 := cgroupMounts(mounts)
	if v2 == "" {
		t.Skip("no unified hierarchy")
	}
	base := filepath.Join(v2, procCgroups(self)[""])
	tree, err := newTree(2, map[string]string{"freezer": base}, nil)
	if err != nil {
		t.Skipf("no v2 tree here: %v", err)
	}
	defer tree.remove()
	c, err := tree.child("t1", Limits{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cmd := startIn(t, c)
	if got := c.Procs(); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Fatalf("Procs = %v, want [%d]", got, cmd.Process.Pid)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Errorf("left after Kill: %v", p)
	}

	// A plugin started by clone3 into a cgroup runs under the filter
	// that let that clone3 through: it still may not unshare; what it
	// leaves behind is found and killed (no pids controller on this
	// unified hierarchy: cgroup.procs is read), and a frozen group
	// (cgroup.freeze) still dies at once.
	c, err = tree.child("t2", Limits{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sh := exec.Command("sh", "-c", `sleep 60 & unshare -n true 2>/dev/null; echo "unshare $?"; read x`)
	in, _ := sh.StdinPipe()
	defer in.Close()
	outPipe, _ := sh.StdoutPipe()
	startCmdIn(t, c, sh)
	line, err := bufio.NewReader(outPipe).ReadString('\n')
	// unshare(1) exits 1 when the call fails (126, 127: not run at all).
	if err != nil || line != "unshare 1\n" {
		t.Errorf("unshare inside the v2-started plugin: %q, %v; want it refused (exit 1)", line, err)
	}
	if left, err := c.KillOthers(sh.Process.Pid); err != nil || !left {
		t.Errorf("KillOthers = %v, %v; want the background sleep found", left, err)
	}
	if got := c.Procs(); !slices.Equal(got, []int{sh.Process.Pid}) {
		t.Errorf("after KillOthers: %v, want only the plugin %d", got, sh.Process.Pid)
	}
	fr := freezerAt(c.dirs["freezer"])
	if fr == nil {
		t.Skip("no cgroup.freeze here")
	}
	if err := fr.set(true); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Errorf("left after Kill of the frozen group: %v", p)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	CloseCgroups()
	os.Exit(code)
}

// TestKillWhileFrozen: a plugin frozen by Freeze (p2pc join
// --pause-when-busy) still dies at once when its cgroup is killed (a
// timeout, a cancel, shutdown).
func TestKillWhileFrozen(t *testing.T) {
	needTree(t)
	if TreeDir("freezer") == "" {
		t.Skip("no freezer")
	}
	c, err := NewCgroup(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	startIn(t, c)
	if err := Freeze(true); err != nil {
		t.Fatal(err)
	}
	defer Freeze(false)
	if got := Frozen(); !slices.Contains(got, filepath.Base(c.Dir("freezer"))) {
		t.Fatalf("Frozen() = %v, want %s in it", got, filepath.Base(c.Dir("freezer")))
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("kill while frozen: %v", err)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Errorf("left after Kill while frozen: %v", p)
	}
}

// TestSweepFrozenTree: the tree of a dead p2pc that was frozen (paused)
// is thawed, killed and removed.
func TestSweepFrozenTree(t *testing.T) {
	needTree(t)
	own := TreeDir("freezer")
	if own == "" {
		t.Skip("no freezer")
	}
	base := filepath.Dir(own)
	dead := filepath.Join(base, cgroupPrefix+"3-frozen")
	if err := os.MkdirAll(filepath.Join(dead, "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupDir(dead) })
	orphan := exec.Command("sleep", "60")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill() })
	if err := writeFile(filepath.Join(dead, "t1", "cgroup.procs"), strconv.Itoa(orphan.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if fr := freezerAt(dead); fr == nil || fr.set(true) != nil {
		t.Fatal("cannot freeze the dead tree")
	}
	if err := sweepCgroups(base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("frozen dead tree still there (%v)", err)
	}
	if err := orphan.Wait(); err == nil {
		t.Error("the frozen tree's process was not killed")
	}
}

// TestCPUGroupOnlyWithQuota: a plugin gets no cpu group of its own (it
// stays in the host's, which costs a task round trip nothing); once
// SetShare sets a CPU quota, plugins start in the tree's cpu group.
func TestCPUGroupOnlyWithQuota(t *testing.T) {
	needTree(t)
	tree, _ := cgroupRoot()
	if tree.version != 1 || tree.dirs["cpu"] == "" {
		t.Skip("no cgroup v1 cpu hierarchy here")
	}
	cpuOf := func(pid int) string {
		t.Helper()
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		return procCgroups(b)["cpu"]
	}
	c, err := NewCgroup(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, host := cpuOf(startIn(t, c).Process.Pid), cpuOf(os.Getpid()); got != host {
		t.Errorf("without a quota the plugin is in cpu group %s, want the host's %s", got, host)
	}
	t.Cleanup(func() {
		writeFile(filepath.Join(tree.dirs["cpu"], "cpu.cfs_quota_us"), "-1")
		tree.cpuCapped.Store(false)
	})
	if err := SetShare(1.5, 0); err != nil {
		t.Fatal(err)
	}
	c2, err := NewCgroup(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	want := "/" + filepath.Base(tree.dirs["cpu"])
	if got := cpuOf(startIn(t, c2).Process.Pid); !strings.HasSuffix(got, want) {
		t.Errorf("with a quota the plugin is in cpu group %s, want the tree's (%s)", got, want)
	}
}

// TestKillFreezesOnlyForkers: killing a cgroup whose processes do not
// fork (a plugin at its pool's close, a task's leftover sleeping child)
// freezes nothing, so a p2pc killed meanwhile leaves nothing frozen; a
// group that keeps forking is frozen in the later rounds and still
// emptied.
func TestKillFreezesOnlyForkers(t *testing.T) {
	needTree(t)
	if TreeDir("freezer") == "" {
		t.Skip("no freezer")
	}
	c, err := NewCgroup(Limits{Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	startIn(t, c)
	startIn(t, c)
	before := freezes.Load()
	if err := c.kill(0); err != nil {
		t.Fatal(err)
	}
	if n := freezes.Load() - before; n != 0 {
		t.Errorf("killing two sleeping processes froze the group %d times, want 0", n)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Fatalf("left after kill: %v", p)
	}

	// A shell that forks without end (its children fork too).
	startCmdIn(t, c, exec.Command("sh", "-c", `f() { while :; do sleep 0.001 & done; }; f & f & wait`))
	deadline := time.Now().Add(5 * time.Second)
	for len(c.Procs()) < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := c.kill(0); err != nil {
		t.Fatalf("kill a forking group: %v", err)
	}
	if p := c.Procs(); len(p) != 0 {
		t.Fatalf("left after killing the forking group: %v", p)
	}
}

// TestCgroupLockDir: root's lock folder is the machine's; another user's
// is its own, refused unless it is a folder of that user closed to others
// (in /tmp anyone can make the name first).
func TestCgroupLockDir(t *testing.T) {
	if got := lockDirFor(0); got != "/run/p2pc/cgroups" {
		t.Errorf("root's lock folder %s", got)
	}
	if got := lockDirFor(1001); got != "/tmp/p2pc-cgroups-1001" {
		t.Errorf("uid 1001's lock folder %s", got)
	}
	uid := os.Geteuid()
	other := uid + 1
	dir := filepath.Join(t.TempDir(), "locks")
	if err := makeLockDir(dir, other); err == nil {
		t.Errorf("a folder of uid %d taken as uid %d's", uid, other)
	}
	if uid == 0 {
		return // root makes only its own folder: the checks below are another user's
	}
	if err := makeLockDir(dir, uid); err != nil {
		t.Fatalf("own folder: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := makeLockDir(dir, uid); err == nil {
		t.Error("a folder open to others was taken")
	}
}

// TestCgroupFailureReason: why a tree could not be made names the
// controllers by error without the per-process folders, so that peers
// alike gossip the same short reason.
func TestCgroupFailureReason(t *testing.T) {
	var f failures
	for i, c := range []string{"memory", "pids", "freezer"} {
		err := error(&fs.PathError{Op: "mkdir", Path: fmt.Sprintf("/sys/fs/cgroup/%s/p2pc-%d-abcdef", c, 100+i), Err: unix.EACCES})
		if c == "freezer" {
			err = &fs.PathError{Op: "mkdir", Path: "/x/p2pc-1-ab", Err: unix.EROFS}
		}
		f.add(c, err)
	}
	want := "memory, pids: mkdir: permission denied; freezer: mkdir: read-only file system"
	if got := f.String(); got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}
