package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
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

	n, err := New(Config{Name: "n", DataDir: data, ShutdownGrace: time.Second, Creds: testCreds})
	if err != nil {
		t.Fatal(err)
	}
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
