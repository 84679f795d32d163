package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/testwait"
)

// TestWorkRootSweepsByLock: a node sharing DATA with others removes the
// work folders of dead processes (their lock is free) and leaves those of
// live ones (held), whatever pid their names carry.
func TestWorkRootSweepsByLock(t *testing.T) {
	data := t.TempDir()
	parent := filepath.Join(data, "work")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	live, err := dirlock.Make(parent, "1-") // pid 1: alive anywhere, yet not the judge
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	dead := filepath.Join(parent, "999999999-x") // a lock file nobody holds
	if err := os.Mkdir(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dead, dirlock.FileName), []byte("pid 1\n"), 0o600)

	n := newNode(t, Config{Name: "n", DataDir: data, ShutdownGrace: time.Second, Creds: testCreds})
	root, err := n.workRoot()
	if err != nil {
		t.Fatal(err)
	}
	mine, err := n.slotDir(0, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Errorf("a live process's work folder was swept: %v", err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dead process's work folder was not swept: %v", err)
	}
	n.removeWork()
	if _, err := os.Stat(filepath.Dir(mine)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removeWork left %s: %v", filepath.Dir(mine), err)
	}
}

// TestJobFolders: each job gets its own input and work folders, named
// in its tasks' policy with nothing of another job's; the last session's
// end removes them, and a later run of the job gets a fresh work folder.
func TestJobFolders(t *testing.T) {
	n := newNode(t, Config{Name: "n", DataDir: t.TempDir(), Slots: 1, ShutdownGrace: time.Second, Creds: testCreds})
	defer n.removeWork()
	a, err := n.openJob("aaaa")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.openJob("bbbb")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := n.openJob("aaaa") // a second session of job aaaa
	if a2 != a {
		t.Fatal("a second session of a job got other folders")
	}
	pa, pb := n.taskPolicy(a), n.taskPolicy(b)
	for _, p := range append(append([]string{}, pa.ReadOnly...), pa.ReadWrite...) {
		for _, q := range append(append([]string{}, pb.ReadOnly...), pb.ReadWrite...) {
			if p == q || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
				t.Errorf("job policies overlap: %s and %s", p, q)
			}
		}
	}
	n.closeJob(a)
	if _, err := os.Stat(a.dir); err != nil {
		t.Errorf("job folder removed while a session remains: %v", err)
	}
	n.closeJob(a)
	for _, d := range []string{a.dir, a.work} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("job folder %s left after the last session: %v", d, err)
		}
	}
	again, _ := n.openJob("aaaa")
	if again.work == a.work {
		t.Errorf("a later run of the job reuses work folder %s", a.work)
	}
	n.closeJob(again)
	n.closeJob(b)
}

func TestInputsImmutable(t *testing.T) {
	for _, tt := range []struct {
		st   sandbox.Status
		want bool
	}{
		{sandbox.Status{LandlockABI: 7, User: "nobody(65534)"}, true},                  // task user, Landlock
		{sandbox.Status{User: "nobody(65534)"}, true},                                  // task user alone: not the owner
		{sandbox.Status{LandlockABI: 3, User: "me(1000)", OwnUser: true}, true},        // Landlock refuses write and truncate
		{sandbox.Status{LandlockABI: 2, User: "me(1000)", OwnUser: true}, false},       // truncate not confined
		{sandbox.Status{User: "me(1000)", OwnUser: true}, false},                       // nothing confines files
		{sandbox.Status{LandlockABI: 7, Disabled: true, User: "nobody(65534)"}, false}, // test switch
	} {
		if got := inputsImmutable(tt.st); got != tt.want {
			t.Errorf("inputsImmutable(%+v) = %v, want %v", tt.st, got, tt.want)
		}
	}
}

// TestJobLinger: with Config.JobLinger a job's folders (and warm pools)
// outlive its last session so long: a rerun of the same job within it
// gets them back, and they are removed once it passes with no session.
func TestJobLinger(t *testing.T) {
	n := newNode(t, Config{Name: "n", DataDir: t.TempDir(), Slots: 1, ShutdownGrace: time.Second, Creds: testCreds, JobLinger: 200 * time.Millisecond})
	defer n.removeWork()
	a, err := n.openJob("aaaa")
	if err != nil {
		t.Fatal(err)
	}
	n.closeJob(a)
	rerun, err := n.openJob("aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if rerun != a {
		t.Fatal("a rerun within the linger got other folders (cold plugin processes)")
	}
	n.closeJob(rerun)
	testwait.For(t, 5*time.Second, "the job's folder gone after a linger of 200ms", func() bool {
		n.mu.Lock()
		_, held := n.jobs["aaaa"]
		n.mu.Unlock()
		_, err := os.Stat(a.dir)
		return !held && errors.Is(err, fs.ErrNotExist)
	})
}

// newNode makes a node that a test does not serve; at the test's end it
// is served with an ended context, which stops it as a node stops:
// listener, store and folders released.
func newNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := n.Serve(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return n
}
