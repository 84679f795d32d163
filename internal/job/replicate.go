package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// Replicas: the journal of a job that has successors (a job handed to the
// swarm, RunOptions.Replicate).
//
// After each commit of the job database (at most every replicaEvery) the
// run takes a consistent snapshot of it (jobdb.Snapshot) and hands it to
// Replicate, which copies it, with the output folder's task outputs, to
// the job's successors. A result counts as durable, and is acknowledged
// to its peer (ack.go), only once a snapshot taken after its journal pass
// committed is on the successors: until then its peer keeps it and hands
// it over to whoever owns the job next. So a successor that takes over
// from the last snapshot it holds loses nothing a living peer finished.

// replicaEvery spaces the snapshots: acknowledgements wait up to about
// that much longer; each snapshot is the whole database.
const replicaEvery = 200 * time.Millisecond

// ErrFenced: a peer refused the coordinator because it has seen a later
// owner of the job (a higher epoch, peerpb.RefuseStale): this run is not
// the job's owner any more.
var ErrFenced = errors.New("fenced off by a later owner of the job")

// ErrNoSuccessors, returned by RunOptions.Replicate, says the job has no
// successors yet (none placed, or too few members to hold it): the
// passes committed so far count as durable on this machine alone, as in
// a run without Replicate. Replicate(ctx, "") asks only that, before a
// snapshot is taken: nil when there are successors to copy to.
var ErrNoSuccessors = errors.New("the job has no successors yet")

// startReplicas runs the replication loop until ctx ends or stop is
// called; stop waits for it.
func (r *runner) startReplicas(ctx context.Context) (stop func()) {
	if r.opts.Replicate == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.replicaLoop(ctx) })
	return func() { cancel(); wg.Wait() }
}

func (r *runner) replicaLoop(ctx context.Context) {
	d := &r.durable
	for {
		moved := d.watch()
		if c := d.committed.Load(); c > d.replicated.Load() {
			if errors.Is(r.opts.Replicate(ctx, ""), ErrNoSuccessors) {
				// Nothing to copy to: no snapshot taken.
				d.replicatedTo(c)
				continue
			}
			start := time.Now()
			err := r.replicateOnce(ctx)
			if err == nil || errors.Is(err, ErrNoSuccessors) {
				d.replicatedAt(c, start)
			} else if ctx.Err() == nil {
				r.log.Warn("journal not copied to the job's successors; results stay unacknowledged until it is", "err", err)
			}
			select {
			case <-time.After(replicaEvery - time.Since(start)):
			case <-ctx.Done():
				return
			}
			continue
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return
		}
	}
}

// replicateOnce snapshots the job database and hands it to Replicate.
func (r *runner) replicateOnce(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "p2pc-journal-")
	if err != nil {
		return fmt.Errorf("snapshot the journal: %w", err)
	}
	defer os.RemoveAll(tmp)
	snap := filepath.Join(tmp, "job.db")
	if err := r.db.Snapshot(ctx, snap); err != nil {
		return err
	}
	return r.opts.Replicate(ctx, snap)
}

// waitReplicated waits until the successors hold every committed pass, or
// ctx ends (the job's end: End makes the peers forget their results).
func (r *runner) waitReplicated(ctx context.Context) error {
	d := &r.durable
	if !d.replicas {
		return nil
	}
	for {
		moved := d.watch()
		if d.replicated.Load() >= d.committed.Load() {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("copy the journal to the job's successors: %w", ctx.Err())
		}
	}
}

// fenced ends the run: a peer has seen a later owner of the job.
func (r *runner) fenced(reason string) {
	r.log.Warn("a peer has seen a later owner of this job: this run stops", "reason", reason)
	if r.stopRun != nil {
		r.stopRun(fmt.Errorf("%w: %s", ErrFenced, reason))
	}
}

// isStale reports whether a refusal says the coordinator was fenced off.
func isStale(reason string) bool { return strings.HasPrefix(reason, peerpb.RefuseStale) }

// departed leaves out of peers (name@id) those of the nodes named gone.
func departed(peers, gone []string) []string {
	if len(gone) == 0 {
		return peers
	}
	out := peers[:0:0]
	for _, p := range peers {
		if !slices.Contains(gone, peerNodeName(p)) {
			out = append(out, p)
		}
	}
	return out
}
