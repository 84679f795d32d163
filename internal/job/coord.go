package job

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/outputs"
)

// OutcomeReopened is the Events.TaskRetry outcome of a task that was
// accepted and is verified again, because a peer that voted for it was
// excluded: it is no longer done.
const OutcomeReopened = sched.OutcomeReopened

// errDrained: no task is left to lease; the worker should stop.
var errDrained = sched.ErrDrained

// errExcluded: the peer lost too many votes and takes no more work; it
// is refused for the rest of the job.
var errExcluded = fmt.Errorf("%w: %w", ErrRefused, sched.ErrExcluded)

// newQueue makes the job's lease queue over the pending tasks, held
// back until released if held (a streamed stage: stream.go).
func newQueue(r *runner, pending []int, held bool) *sched.Queue {
	var hold []int
	if held {
		pending, hold = nil, pending
	}
	return sched.New(sched.Config{
		JobID:      r.p.ID.String(),
		Verify:     r.p.Spec.Verify,
		Retries:    r.p.Spec.Retries,
		BatchMax:   r.p.Spec.Batch,
		Probe:      probeWindow(r.p.Spec.Batch),
		Pending:    pending,
		Held:       hold,
		Alone:      r.opts.Remote == nil || r.opts.Remote.Swarm == nil,
		Verifier:   r.verifier,
		MinPeers:   r.opts.MinPeers,
		Strikes:    r.opts.Strikes,
		MaxLost:    r.opts.MaxLost,
		TrustFile:  r.opts.TrustFile,
		Self:       r.opts.Node,
		Log:        r.log,
		Report:     r.rep,
		Records:    r.recs,
		ReportLock: reportLock{r},
		Apply:      queueEnv{r},
	})
}

// probeWindow is the queue's probe window: none when batching is off
// (spec batch 1), when the first wave is singles anyway.
func probeWindow(batch int) time.Duration {
	if batch == 1 {
		return 0
	}
	return sched.ProbeWindow
}

// reportLock is the runner's report lock as the queue takes it: what the
// queue changed under it gets journaled.
type reportLock struct{ r *runner }

func (l reportLock) Lock() { l.r.mu.Lock() }

func (l reportLock) Unlock() {
	l.r.dirty = true
	l.r.mu.Unlock()
	l.r.wake()
}

// queueEnv is the runner's side of the queue: it applies the queue's
// decisions (output folders, events, the journal) after the queue let its
// lock go, one batch at a time in the order they were decided. The
// records a batch changed (sched.Changed) are marked for the journal once
// its outputs are placed, under one hold of runner.mu.
type queueEnv struct{ r *runner }

func (e queueEnv) Apply(ds []sched.Decision) []error {
	var errs []error
	changed := false
	for i, d := range ds {
		switch d := d.(type) {
		case sched.Accept:
			placed, err := e.r.place(d.Task, d.TaskID, d.Output)
			if err != nil {
				if errs == nil {
					errs = make([]error, len(ds))
				}
				errs[i] = err
			} else if e.r.opts.link != nil {
				e.r.linkPlaced(d.Task, d.TaskID, placed)
			}
		case sched.Discard:
			os.RemoveAll(d.Stage)
		case sched.Done:
			e.r.opts.Events.TaskDone(d.TaskID, d.OK)
		case sched.Retry:
			e.r.opts.Events.TaskRetry(d.TaskID, d.Outcome, d.Err)
		}
		if _, ok := sched.Changed(d); ok {
			changed = true
		}
	}
	if changed {
		e.r.mu.Lock()
		for _, d := range ds {
			if t, ok := sched.Changed(d); ok {
				e.r.touchedLocked(t)
			}
		}
		e.r.mu.Unlock()
	}
	if e.r.opts.link != nil {
		// Once marked for the journal: the graph hears of a task once
		// the pass that holds its record is committed (stream.go).
		for _, d := range ds {
			if d, ok := d.(sched.Done); ok {
				e.r.linkDone(d)
			}
		}
	}
	return errs
}

// Fetch gets a digest-only replica's output into a new folder of the work
// root and checks it against want.
func (e queueEnv) Fetch(ctx context.Context, id string, want digest.ID, fetch sched.FetchFunc) (string, []string, error) {
	dir, err := os.MkdirTemp(e.r.workRoot, id+".fetch-*")
	if err != nil {
		return "", nil, e.r.outputFault(fmt.Errorf("fetch output of %s: %w", id, err))
	}
	if err := fetch(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	got, files, err := outputs.Digest(dir)
	if err == nil && got != want {
		err = fmt.Errorf("fetched output hashes to %.12s, not %.12s", got.String(), want.String())
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, files, nil
}
