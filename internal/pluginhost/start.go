// Starting a pool's processes: its private folders and one process.

package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// dirs is the pool's private directory tree, made on the first start.
type dirs struct {
	root, home, tmp, work string
	// sock is where go-plugin makes the plugins' unix sockets: root/s, or
	// a short directory in /tmp when that path is too long for a socket
	// address (108 bytes on Linux, the socket's own name included).
	sock string
	// owned are the folders the pool holds the lock of (root, and sock
	// when it is apart): Close removes them.
	owned []*dirlock.Dir
}

// maxSockDir is the longest directory the sockets can live in: go-plugin
// adds "/plugin-dirNNNNNNNNNN/pluginNNNNNNNNNN" (38 bytes) and the kernel
// allows 107.
const maxSockDir = 107 - 38

// newProcLocked makes the pool's folders on its first start and a process
// not yet started, counted in all (so that starts in flight count against
// size).
func (pl *Pool) newProcLocked() (*proc, error) {
	if pl.dirs.root == "" {
		if err := pl.makeDirs(); err != nil {
			pl.stats.startFailures.Add(1)
			return nil, &Error{Op: "start", Plugin: pl.cfg.Path, Err: err}
		}
	}
	p := newProc(pl)
	pl.all[p] = struct{}{}
	return p, nil
}

// spawn starts p for the pool and puts it on the idle list; done gets the
// start's error (nil: started). The start is the pool's, not the
// caller's: a caller that gives up meanwhile (its lease revoked, its job
// over) leaves the process warm for the next task. Killing it
// half-started wasted every start of a busy swarm's job end, and the next
// job's starts were cut short the same way (a confined start costs
// milliseconds). Close stops it.
func (pl *Pool) spawn(ctx context.Context, p *proc, done chan<- error) {
	defer pl.spawns.Done()
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-pl.closing:
			stop()
		case <-sctx.Done():
		}
	}()
	err := pl.start(sctx, p)
	pl.mu.Lock()
	pl.starting--
	if err != nil {
		pl.failed, pl.failedAt = err, time.Now()
	}
	if err == nil && pl.closed {
		err = &Error{Op: "start", Plugin: pl.cfg.Path, Kind: ErrClosed} // Close kills it
	} else if err == nil {
		pl.idle = append(pl.idle, p)
	}
	pl.notifyLocked()
	pl.mu.Unlock()
	done <- err
}

// start starts p, made by newProcLocked.
func (pl *Pool) start(ctx context.Context, p *proc) error {
	pl.grantOnce.Do(func() {
		pol := pl.policy()
		pl.grantErr = sandbox.Grant(pol, pl.hostLog)
		pl.mu.Lock()
		pl.conf = sandbox.NewConfinement(pol)
		pl.mu.Unlock()
	})
	if pl.grantErr != nil {
		pl.stats.startFailures.Add(1)
		close(p.startDone) // never started: shutdown must not wait for it
		pl.forget(p)
		return &Error{Op: "start", Plugin: pl.cfg.Path, Err: pl.grantErr}
	}

	t0 := time.Now()
	phasetrace.At("p.spawn", 0, t0)
	if err := p.start(ctx); err != nil {
		pl.stats.startFailures.Add(1)
		p.shutdown()
		var e *Error
		if errors.As(err, &e) {
			p.finishError(e)
		}
		pl.hostLog.Debug("plugin start failed", "err", err)
		return err
	}
	pl.stats.starts.Add(1)
	took := time.Since(t0)
	pl.mu.Lock()
	if pl.startCost == 0 {
		pl.startCost = took
	} else { // a moving mean: a start's cost drifts with the machine's load
		pl.startCost += (took - pl.startCost) / 4
	}
	pl.mu.Unlock()
	phasetrace.Mark("p.spawned", uint64(p.pidValue()))
	pl.hostLog.Debug("plugin started", "pid", p.pidValue(), "took", time.Since(t0))
	return nil
}

// dirPrefix names a pool's private directory in os.TempDir(), followed by
// the host's pid (for people; the lock in it decides who owns it), "-" and
// a random suffix.
const dirPrefix = "p2pc-plugin-"

// makeDirs makes the private HOME, TMPDIR and (unless Config.Dir) working
// directory, after removing those that hosts killed before their Close
// left behind. Called with pl.mu held.
func (pl *Pool) makeDirs() error {
	sweepStaleDirs(pl.hostLog)
	name := dirPrefix + strconv.Itoa(os.Getpid()) + "-"
	rootDir, err := dirlock.Make(os.TempDir(), name)
	if err != nil {
		return fmt.Errorf("make private dir: %w", err)
	}
	root := rootDir.Path
	d := dirs{root: root, home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp"), work: pl.cfg.Dir, owned: []*dirlock.Dir{rootDir}}
	mk := []string{d.home, d.tmp}
	if d.work == "" {
		d.work = filepath.Join(root, "work")
		mk = append(mk, d.work)
	}
	for _, dir := range mk {
		if err := os.Mkdir(dir, 0o700); err != nil {
			rootDir.Remove()
			return fmt.Errorf("make private dir: %w", err)
		}
	}
	// The sockets go to a folder of their own, so a confined plugin may
	// write there and in home, tmp and work, but not in root (its lock).
	d.sock = filepath.Join(root, "s")
	if len(d.sock) <= maxSockDir {
		if err := os.Mkdir(d.sock, 0o700); err != nil {
			rootDir.Remove()
			return fmt.Errorf("make socket dir: %w", err)
		}
	} else {
		sockDir, err := dirlock.Make("/tmp", name)
		if err != nil {
			rootDir.Remove()
			return fmt.Errorf("make socket dir: %w", err)
		}
		d.sock = sockDir.Path
		d.owned = append(d.owned, sockDir)
	}
	pl.dirs = d
	return nil
}

// sweepStaleDirs removes the private directories of hosts that no longer
// run (a host killed with SIGKILL cannot remove its own): those whose lock
// it can take. A directory whose lock is held is left alone, whatever PID
// namespace its owner runs in.
func sweepStaleDirs(log *slog.Logger) {
	tmps := []string{os.TempDir()}
	if filepath.Clean(tmps[0]) != "/tmp" {
		tmps = append(tmps, "/tmp") // socket folders when TMPDIR is long
	}
	for _, tmp := range tmps {
		removed, err := dirlock.Sweep(tmp, dirPrefix)
		for _, dir := range removed {
			log.Debug("removed private dir of a dead host", "dir", dir)
		}
		if err != nil {
			log.Warn("sweep private dirs of dead hosts", "err", err)
		}
	}
}
