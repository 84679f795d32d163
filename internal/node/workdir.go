package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/taskrun"
)

// Work folders. Every job has one (jobFiles.work), and in it every slot
// that runs its tasks has one, reused by task after task of the job and
// emptied after each: a task still gets an empty private folder, and the node
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

// slotDir returns slot's work folder in the job work folder root,
// empty, making it on first use. Only slot's runner calls it.
func (n *Node) slotDir(slot int, root string) (string, error) {
	dir := filepath.Join(root, "slot"+strconv.Itoa(slot))
	if slot < len(n.slotMade) && n.slotMade[slot] == dir {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make work folder: %w", err)
	}
	if err := sandbox.Own(dir, sandbox.Policy{User: n.cfg.TaskUser}); err != nil {
		return "", err
	}
	if slot < len(n.slotMade) {
		n.slotMade[slot] = dir
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
	if taskrun.EmptyDir(dir) {
		return
	}
	os.RemoveAll(dir)
	if slot < len(n.slotMade) {
		n.slotMade[slot] = ""
	}
}

// removeWork removes this process's work folder (at shutdown, when no
// task runs).
func (n *Node) removeWork() {
	if n.workLock != nil {
		n.workLock.Remove()
	}
}

// jobFiles are the folders of one job on this node, side by side in
// base (in this process's work folder, so those of a node that died are
// swept with it, and two nodes sharing DATA never share them): dir holds
// its inputs (dir/inputs, read-only to its tasks), work its slots' work
// folders. A job's folders are made when its first session starts and
// removed with its plugin processes when its last one ends.
type jobFiles struct {
	id       string
	base     string
	dir      string
	work     string
	sessions int         // guarded by Node.mu
	linger   *time.Timer // closes the job when it fires; guarded by Node.mu
}

// openJob registers a session of job id, making its folders if it is the
// first. Every call is paired with a closeJob.
func (n *Node) openJob(id string) (*jobFiles, error) {
	root, err := n.workRoot()
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	j := n.jobs[id]
	if j == nil {
		n.jobSeq++
		// A new name each time: a slot's cached folder of an earlier
		// run of the job never matches, and a job that ends does not
		// remove the folders of its next run.
		base := filepath.Join(root, short(id)+"-"+strconv.FormatUint(n.jobSeq, 10))
		j = &jobFiles{id: id, base: base, dir: filepath.Join(base, "job"), work: filepath.Join(base, "work")}
		n.jobs[id] = j
	}
	j.sessions++
	if j.linger != nil && j.linger.Stop() {
		j.linger = nil // a rerun while the job lingered: its warm pools serve it
	}
	for _, dir := range []string{j.dir, j.work} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return j, fmt.Errorf("make job folder: %w", err)
		}
	}
	return j, nil
}

// closeJob ends a session of job j: the last one closes the job's plugin
// pools and removes its folders.
// With Config.JobLinger, that waits so long for a rerun of the job.
func (n *Node) closeJob(j *jobFiles) {
	n.mu.Lock()
	j.sessions--
	if j.sessions > 0 {
		n.mu.Unlock()
		return
	}
	if d := n.cfg.JobLinger; d > 0 {
		j.linger = time.AfterFunc(d, func() { n.endJob(j) })
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	n.endJob(j)
}

// endJob closes job j's plugin pools and removes its folders, unless a
// session of it started again meanwhile.
func (n *Node) endJob(j *jobFiles) {
	n.mu.Lock()
	if j.sessions > 0 || n.jobs[j.id] != j {
		n.mu.Unlock()
		return
	}
	delete(n.jobs, j.id)
	var pools []*pluginhost.Pool
	for k, p := range n.pools {
		if k.job == j.id {
			pools = append(pools, p)
			delete(n.pools, k)
		}
	}
	n.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
	os.RemoveAll(j.base)
}

// inputsImmutable reports whether no task can change a byte of an input
// copy (jobFiles.dir/inputs, mode 0444, owned by the node's user):
// tasks run as another user, or Landlock refuses them writes and
// truncation there (ABI 3). Else a copy is made afresh from the block
// store (which verifies every block it reads) for every session.
func (n *Node) inputsImmutable() bool { return inputsImmutable(n.Confinement()) }

func inputsImmutable(st sandbox.Status) bool {
	return !st.Disabled && (!st.OwnUser || st.LandlockABI >= 3)
}
