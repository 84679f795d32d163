package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/job/vc"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// Events receives a run's progress. Methods are called from several
// goroutines; implementations must be safe for that and fast.
type Events interface {
	// Started: the job starts with total tasks, of which done are already
	// done (reused from an earlier run).
	Started(total, done int)
	// TaskDone: a task finished for good (ok or failed after its retries).
	TaskDone(id string, ok bool)
	// TaskRetry: an attempt failed and the task goes back in the queue.
	TaskRetry(id string, outcome string, err error)
	// TaskProgress and TaskPartial relay the plugin's callbacks.
	TaskProgress(id string, fraction float64, note string)
	TaskPartial(id string, data []byte)
	// Counts: the tasks by state, while tasks run (at most five times a
	// second, changed or not) and once when they are over.
	Counts(c Counts)
}

// Counts are a job's tasks by state. Done + Failed + Running + Queued =
// Total.
type Counts struct {
	Total   int
	Done    int // accepted
	Failed  int // failed for good
	Running int // leased to a slot or a peer (a peer holds a few ahead of its free slots)
	Queued  int // waiting for a slot (never tried, or to run again)
}

// RunOptions tune Run.
type RunOptions struct {
	// Slots is the number of tasks run at once on this machine.
	Slots int
	// Node names this machine in the report.
	Node   string
	Events Events
	Logger *slog.Logger
	// JournalEvery is how often report.json is rewritten while the job
	// runs (default 1s).
	JournalEvery time.Duration
	// Remote, if set, farms tasks out to the swarm's peers too.
	Remote *RemoteOptions
	// TrustFile keeps peers' trust across jobs (adaptive replication);
	// empty: trust lives for one job only.
	TrustFile string
	// MinPeers holds back every lease until this many remote peers have
	// enrolled (0: start at once).
	MinPeers int
	// LeaseGrace is added to the task timeout to give the lease deadline
	// after which a silent worker's lease is revoked (default 10s).
	LeaseGrace time.Duration
	// Strikes faults exclude a peer from the job, and MaxLost lost
	// attempts fail a task (0: sched.DefaultStrikes, sched.DefaultMaxLost).
	Strikes, MaxLost int
	// StallAfter (default 30s): when work remains, nothing runs, and no
	// lease was handed out or settled for this long, the run logs why
	// (which peers, what each refuses or fails with, which addresses do
	// not answer), and again every StallAfter while it waits for a peer
	// that can take the work.
	StallAfter time.Duration
	// WaitPeers bounds that wait: stalled so for WaitPeers, the run ends
	// with an error wrapping ErrStalled that says why (0: it waits for
	// ever).
	WaitPeers time.Duration
	// Live, if set, lets a watcher read the running job (the web view).
	Live *Live
}

// Run executes p's tasks on local slots, then its reduce step, and returns
// the final report (also written to OutDir/report.json). The error is nil
// for a complete job, wraps ErrTasksFailed when tasks failed, and is the
// context's error when the run was interrupted.
func Run(ctx context.Context, p *Prepared, opts RunOptions) (*report.Report, error) {
	if opts.Slots < 0 {
		opts.Slots = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Events == nil {
		opts.Events = nopEvents{}
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 30 * time.Second
	}
	if opts.LeaseGrace <= 0 {
		opts.LeaseGrace = 10 * time.Second
	}
	if opts.JournalEvery <= 0 {
		opts.JournalEvery = time.Second
	}
	r := &runner{p: p, opts: opts, log: opts.Logger.With("component", "job", "job", p.ID.String()[:12]), faulted: make(chan struct{})}
	if why := localMisfit(p.Spec.Resources); why != "" && r.opts.Slots > 0 {
		r.log.Warn("no task runs on this machine's own slots: "+why, "local_slots", r.opts.Slots)
		r.opts.Slots = 0
	}
	return r.run(ctx)
}

type runner struct {
	p    *Prepared
	opts RunOptions
	log  *slog.Logger
	pool *pluginhost.Pool
	vc   *vc.State
	// workRoot holds per-attempt folders (OUT/.p2pc/work).
	workRoot string
	// verifier: the plugin checks outputs itself (sdk.Verifier).
	verifier bool

	mu    sync.Mutex // guards rep and dirty
	rep   *report.Report
	dirty bool

	// fault is the first write that failed for a reason of this machine's
	// own disk; faulted is closed then, and the run stops (ErrLocalDisk).
	fault   atomic.Pointer[diskFault]
	faulted chan struct{}
}

func (r *runner) run(ctx context.Context) (*report.Report, error) {
	job := r.p.Spec
	workRoot := filepath.Join(r.p.OutDir, ".p2pc", "work")
	r.workRoot = workRoot
	if err := os.RemoveAll(workRoot); err != nil {
		return nil, r.outputFault(fmt.Errorf("clean work dir: %w", err))
	}
	if err := os.MkdirAll(workRoot, 0o755); err != nil {
		return nil, r.outputFault(fmt.Errorf("make work dir: %w", err))
	}
	if err := os.MkdirAll(filepath.Join(r.p.OutDir, "tasks"), 0o755); err != nil {
		return nil, r.outputFault(fmt.Errorf("make tasks dir: %w", err))
	}
	defer os.RemoveAll(filepath.Join(r.p.OutDir, ".p2pc"))

	// Tasks read the inputs and the output folder (a reduce step reads
	// the tasks' outputs there) and write only their work folders.
	readOnly := []string{r.p.OutDir}
	for _, in := range r.p.Inputs {
		readOnly = append(readOnly, in.Path)
	}
	r.pool = pluginhost.NewPool(pluginhost.Config{
		Path:     r.p.Plugin.Path,
		Checksum: r.p.Plugin.Digest,
		Logger:   r.opts.Logger,
		Sandbox:  sandbox.Policy{ReadOnly: readOnly, ReadWrite: []string{workRoot}, Network: job.Sandbox.Network},
		Limits:   sandbox.Limits{Memory: job.Resources.Memory},
	}, max(r.opts.Slots, 1))
	defer r.pool.Close()

	info, err := r.pool.Describe(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, bad(fmt.Errorf("%s: plugin %q: %w", job.File, job.Plugin, err))
	}
	if job.Reduce && !info.Reduce {
		return nil, bad(fmt.Errorf("%s: the spec asks for reduce, but plugin %q has no reduce step", job.File, job.Plugin))
	}

	r.verifier = info.Verify
	r.rep = r.newReport(info)
	r.opts.Live.attach(r)
	ids := make([]string, len(job.Tasks))
	for i, t := range job.Tasks {
		ids[i] = t.ID
	}
	var keep func(ctx context.Context, data []byte) error
	if ro := r.opts.Remote; ro != nil && ro.Store != nil {
		keep = func(ctx context.Context, data []byte) error {
			_, _, err := blocks.PutFile(ctx, ro.Store, bytes.NewReader(data), 0)
			return err
		}
	}
	r.vc = vc.New(ids, keep, r.log)
	reused := r.reuse()
	if err := r.journal(); err != nil {
		return nil, r.outputFault(err)
	}
	r.opts.Events.Started(len(job.Tasks), reused)

	stopJournal := r.startJournal()
	failed, stall := r.runTasks(ctx, workRoot)
	stopJournal()

	switch f := r.fault.Load(); {
	case f != nil:
		// This machine's disk: the report is kept if it can be written; a
		// rerun resumes from the last one that was.
		r.finish(report.StateFailed, f.Error())
		if err := r.journal(); err != nil {
			r.log.Warn("journal report", "err", err)
		}
		return r.rep, f
	case ctx.Err() != nil:
		r.finish(report.StateInterrupted, "interrupted")
		return r.rep, errors.Join(ctx.Err(), r.journal())
	case stall != "":
		r.finish(report.StateFailed, stall)
		if err := r.journal(); err != nil {
			return r.rep, err
		}
		return r.rep, fmt.Errorf("%s: %w", stall, ErrStalled)
	case failed > 0:
		msg := fmt.Sprintf("%d of %d tasks failed", failed, len(job.Tasks))
		r.finish(report.StateFailed, msg)
		if err := r.journal(); err != nil {
			return r.rep, err
		}
		return r.rep, fmt.Errorf("%s: %w", msg, ErrTasksFailed)
	}
	if job.Reduce {
		if err := r.reduce(ctx, workRoot); err != nil {
			state := report.StateFailed
			if ctx.Err() != nil {
				state = report.StateInterrupted
			}
			r.finish(state, "reduce: "+err.Error())
			if jerr := r.journal(); jerr != nil {
				return r.rep, jerr
			}
			if ctx.Err() != nil {
				return r.rep, ctx.Err()
			}
			return r.rep, fmt.Errorf("reduce: %w: %w", err, ErrTasksFailed)
		}
	}
	r.finish(report.StateComplete, "")
	return r.rep, r.journal()
}

func (r *runner) newReport(info pluginproto.PluginInfo) *report.Report {
	job := r.p.Spec
	rep := &report.Report{
		Format:  report.Format,
		JobID:   r.p.ID.String(),
		Name:    job.Name,
		Spec:    job.File,
		State:   report.StateRunning,
		Started: time.Now().UTC(),
		Node:    r.opts.Node,
		Plugin: report.Plugin{
			Path:    r.p.Plugin.Path,
			Digest:  r.p.Plugin.Digest.String(),
			Name:    info.Name,
			Version: info.Version,
		},
		Summary: report.Summary{Total: len(job.Tasks)},
		Tasks:   make([]report.Task, len(job.Tasks)),
	}
	for i, t := range job.Tasks {
		rep.Tasks[i] = report.Task{ID: t.ID, Params: job.TaskParamsJSON(i), State: report.TaskPending, Attempts: []report.Attempt{}}
	}
	return rep
}

// reuse marks as done the tasks that an earlier run of the same job
// finished and whose output files still match their digest.
func (r *runner) reuse() int {
	prev := r.p.Previous
	if prev == nil {
		return 0
	}
	byID := make(map[string]*report.Task, len(prev.Tasks))
	for i := range prev.Tasks {
		byID[prev.Tasks[i].ID] = &prev.Tasks[i]
	}
	n := 0
	for i := range r.rep.Tasks {
		t := &r.rep.Tasks[i]
		old, ok := byID[t.ID]
		if !ok || old.State != report.TaskDone || old.Digest == "" {
			continue
		}
		dir := filepath.Join(r.p.OutDir, "tasks", t.ID)
		d, files, err := outputs.Digest(dir)
		if err != nil || d.String() != old.Digest {
			continue
		}
		t.State, t.Peer, t.Attempts, t.Digest = report.TaskDone, old.Peer, old.Attempts, old.Digest
		t.Files = report.TaskFiles(t.ID, files)
		r.rep.Summary.Done++
		n++
	}
	if n > 0 {
		r.log.Info("reusing tasks of an earlier run", "done", n)
	}
	return n
}

func (r *runner) finish(state, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.State, r.rep.Error, r.rep.Finished = state, msg, time.Now().UTC()
	r.dirty = true
}

// journal writes the report if it changed.
func (r *runner) journal() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.journalLocked()
}

func (r *runner) journalLocked() error {
	if err := report.Write(r.p.OutDir, r.rep); err != nil {
		return err
	}
	r.dirty = false
	return nil
}

// startJournal rewrites report.json every JournalEvery while it changes.
func (r *runner) startJournal() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.opts.JournalEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.mu.Lock()
				if r.dirty {
					if err := r.journalLocked(); err != nil {
						r.log.Warn("journal report", "err", err)
						r.outputFault(err)
					}
				}
				r.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

type nopEvents struct{}

func (nopEvents) Started(int, int)                     {}
func (nopEvents) TaskDone(string, bool)                {}
func (nopEvents) TaskRetry(string, string, error)      {}
func (nopEvents) TaskProgress(string, float64, string) {}
func (nopEvents) TaskPartial(string, []byte)           {}
func (nopEvents) Counts(Counts)                        {}
