package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// Work folders. Every slot has one, reused by task after task and emptied
// after each: a task still gets an empty private folder, and the node
// spares the two directory operations per task that a fresh folder costs
// (on a peer with 32 busy slots they contended for the parent folder's
// lock and were most of its per-task kernel time).
//
// The folders live in DATA/work/<pid>-<random>, a folder this process
// owns through the lock in it (internal/dirlock), so two p2pc processes
// sharing a data directory never touch each other's, and a node removes
// the folders of processes that died without cleaning up: those whose
// lock it can take. (The pid in the name is for people.)

// workRoot makes this process's work folder, once, after sweeping those
// of dead processes. Called by slot runners under no lock: n.workOnce.
func (n *Node) workRoot() (string, error) {
	n.workOnce.Do(func() {
		parent := filepath.Join(n.cfg.DataDir, "work")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			n.workErr = fmt.Errorf("make work folder: %w", err)
			return
		}
		removed, err := dirlock.Sweep(parent, "")
		if len(removed) > 0 || err != nil {
			n.log.Debug("swept work folders of dead processes", "removed", removed, "err", err)
		}
		d, err := dirlock.Make(parent, strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			n.workErr = fmt.Errorf("make work folder: %w", err)
			return
		}
		n.workLock, n.workDir = d, d.Path
	})
	return n.workDir, n.workErr
}

// slotDir returns slot's work folder, empty, making it on first use. Only
// slot's runner calls it.
func (n *Node) slotDir(slot int) (string, error) {
	root, err := n.workRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "slot"+strconv.Itoa(slot))
	if slot < len(n.slotMade) && n.slotMade[slot] {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make work folder: %w", err)
	}
	if slot < len(n.slotMade) {
		n.slotMade[slot] = true
	}
	return dir, nil
}

// clearSlotDir empties slot's work folder after a task, and removes the
// output staging folder beside it if the task made one. A folder that is
// not empty is removed, and made again by the next task.
func (n *Node) clearSlotDir(slot int, dir string, staged bool) {
	if staged {
		os.RemoveAll(dir + ".out")
	}
	if empty(dir) {
		return
	}
	os.RemoveAll(dir)
	if slot < len(n.slotMade) {
		n.slotMade[slot] = false
	}
}

// removeWork removes this process's work folder (at shutdown, when no
// task runs).
func (n *Node) removeWork() {
	if n.workLock != nil {
		n.workLock.Remove()
	}
}

// empty reports whether dir is an existing, empty folder.
func empty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}
