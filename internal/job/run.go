package job

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/job/vc"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
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
	// Version names this p2pc in the job database.
	Version string
	// Remote, if set, farms tasks out to the swarm's peers too.
	Remote *RemoteOptions
	// TaskUser is the account local tasks run as (sandbox.TaskUser: set
	// when p2pc runs as root); nil: the submitter's own.
	TaskUser *sandbox.User
	// TrustFile keeps peers' trust across jobs (adaptive replication);
	// empty: trust lives for one job only.
	TrustFile string
	// MinPeers holds back every lease until this many remote peers have
	// enrolled (0: start at once).
	MinPeers int
	// LeaseGrace is added to the task timeout to give the lease deadline
	// after which a silent worker's lease is revoked (default
	// peerpb.LeaseGrace, which paused peers rely on).
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
	// Phase, if set, is told when each phase of the run ends (p2pc run
	// --trace-phases: where the whole command's time goes).
	Phase func(what string)
	// Stage names the job as a stage of a job with stages
	// ("<job>/<stage>", RunGraph): kept in its job database (StageKey).
	Stage string
	// Epoch is the epoch of the job's ownership (a job handed to the
	// swarm; 0: not one), sent in Hello: peers that have seen a higher
	// one refuse the run (ErrFenced).
	Epoch uint64
	// Replicate, if set, copies the job's journal to its successors: it is
	// given a consistent snapshot of the job database (a temporary file)
	// after commits, and a result is acknowledged to its peer only once a
	// snapshot holding it was copied (replicate.go). Called with "", it
	// says whether there are successors (ErrNoSuccessors if none yet).
	Replicate func(ctx context.Context, snapshot string) error
	// Departed are node names known to be gone (an owner that died): a
	// resumed run does not wait for their hand-over.
	Departed []string
	// link ties the run of a stage to its graph (stream.go), and
	// readOnly are folders its local tasks read besides the job's (the
	// graph's output folder, where the upstream outputs are).
	link     stageLink
	readOnly []string
	// slots, if set, are this machine's slots that the stages of a graph
	// share: a local worker holds one while it runs a batch.
	slots chan struct{}
	// Ending, if set, is called once the run no longer needs the swarm
	// and its results are on disk: its tasks and reduce step are over,
	// the peers were told, the job database is closed and report.json
	// written (or failed to be). The caller may stop its node while the
	// run closes its plugin processes and returns. It must not block.
	Ending func()
}

// errNoReduce: the spec asks for a reduce step the plugin lacks.
var errNoReduce = errors.New("no reduce step")

// Run executes p's tasks on local slots, then its reduce step, and returns
// the final report's job-level fields (its Tasks are nil: they are in
// OUT/job.db and OUT/report.json, read a task at a time with jobdb's
// EachTask). The job's state is journaled in OutDir/job.db while it
// runs; report.json is written when the run ends. The error is nil for a
// complete job, wraps ErrTasksFailed when tasks failed, ErrStalled when
// no worker took the work left within RunOptions.WaitPeers, is the context's
// error when the run was interrupted, and wraps jobdb.ErrFull when the
// disk filled up under the job database.
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
	if opts.Phase == nil {
		opts.Phase = func(string) {}
	}
	if opts.Ending == nil {
		opts.Ending = func() {}
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 30 * time.Second
	}
	if opts.LeaseGrace <= 0 {
		opts.LeaseGrace = peerpb.LeaseGrace
	}
	r := &runner{p: p, opts: opts, log: opts.Logger.With("component", "job", "job", p.ID.String()[:12]), faulted: make(chan struct{})}
	r.durable.replicas = opts.Replicate != nil
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
	// folders: which tasks may have an output folder (place).
	folders taskFolders
	// stored: the earlier run's outputs while reuse checks them.
	stored *storedIndex
	// verifier: the plugin checks outputs itself (sdk.Verifier).
	verifier bool

	db *jobdb.DB
	// stopRun ends the run's work (its cause: why), as when the job
	// database fails.
	stopRun context.CancelCauseFunc
	// kick wakes the journal: something changed.
	kick chan struct{}
	// durable says which journal passes the database committed (ack.go).
	durable durability
	// stallSaid: the stall of the journal's copies last logged (unix ns,
	// 0: none; leasegate.go).
	stallSaid atomic.Int64

	// mu guards rep, recs, dirty, touched, held and marks. It is the
	// queue's ReportLock: taken after sched.Queue's lock, before jobdb's.
	mu      sync.Mutex
	rep     *report.Report // the job's fields; its Tasks are nil: recs
	recs    *records
	dirty   bool       // the job's own fields changed
	touched []int      // tasks changed since the last journal
	held    []heldTask // running tasks the journal holds back (holdRunning)
	marks   []uint8    // by task: markTouched (in touched), markHeld (in held)

	// pub is the job's hello to peers (publish.go).
	pub published
	// own: the inputs tasks see of their own, as the hello names them
	// (graph.go).
	own ownFiles
	// deferred: of a streamed stage, the tasks an earlier run finished,
	// reused or not at their release (stream.go); under mu.
	deferred map[int]DoneTask
	// linkOut: the outputs placed whose Done is yet to come (stream.go).
	linkMu   sync.Mutex
	linkOut  map[int]stageOutput
	linkWait []linkNote
	linkKick chan struct{}
	// leaseRefs: the inputs leases carry to peers (stream.go).
	leaseRefs fileRefs

	// fault is the first write that failed for a reason of this machine's
	// own disk; faulted is closed then, and the run stops (ErrLocalDisk).
	fault   atomic.Pointer[diskFault]
	faulted chan struct{}
}

// warnUnreadable says, once per input and before any task runs, which
// inputs the local tasks' user (a root submitter's task user) could not
// read by the file's own permissions: the plugin host gives that user an
// ACL entry on the file (sandbox.Grant), which outlives the job.
func (r *runner) warnUnreadable(pol sandbox.Policy) {
	paths := make([]string, len(r.p.Inputs))
	for i, in := range r.p.Inputs {
		paths[i] = in.Path
	}
	for _, path := range sandbox.Unreadable(paths, pol) {
		for _, in := range r.p.Inputs {
			if in.Path == path {
				r.log.Warn(fmt.Sprintf("input %q: the task user %s cannot read %s by its permissions; this machine's tasks get read access through an ACL entry on it, which stays after the job (setfacl -x u:%d %s takes it back)",
					in.Name, pol.User, path, pol.User.UID, path), "input", in.Name, "path", path)
				break
			}
		}
	}
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
	defer func() {
		os.RemoveAll(filepath.Join(r.p.OutDir, ".p2pc"))
		r.opts.Phase("work folders removed")
	}()
	r.opts.Phase("work folders made")

	// Tasks read the inputs and the output folder (a reduce step reads
	// the tasks' outputs there) and write only their work folders.
	readOnly := append([]string{r.p.OutDir}, r.opts.readOnly...)
	for _, in := range r.p.Inputs {
		readOnly = append(readOnly, in.Path)
	}
	for _, f := range r.ownFiles().files {
		readOnly = append(readOnly, f.path)
	}
	pol := sandbox.Policy{ReadOnly: readOnly, ReadWrite: []string{workRoot}, Network: job.Sandbox.Network, User: r.opts.TaskUser}
	if r.opts.Slots > 0 {
		r.warnUnreadable(pol)
	}
	r.pool = pluginhost.NewPool(pluginhost.Config{
		Path:     r.p.Plugin.Path,
		Checksum: r.p.Plugin.Digest,
		Verified: r.p.Plugin.Identity,
		Logger:   r.opts.Logger,
		Sandbox:  pol,
		Limits:   sandbox.Limits{Memory: job.Resources.Memory, FileSize: sandbox.DefaultFileSize},
	}, max(r.opts.Slots, 1))
	defer func() {
		r.pool.Close()
		r.opts.Phase("plugin pool closed")
	}()

	// The plugin's first start (tens of milliseconds) overlaps the opening
	// of the job database, and the publishing of the job's blocks both.
	stopPublish := r.startPublish(ctx)
	defer stopPublish()
	type described struct {
		info pluginproto.PluginInfo
		err  error
	}
	desc := make(chan described, 1)
	go func() {
		info, err := r.describe(ctx)
		desc <- described{info, err}
	}()
	dbPath := filepath.Join(r.p.OutDir, jobdb.FileName)
	_, statErr := os.Stat(dbPath)
	madeDB := errors.Is(statErr, fs.ErrNotExist)
	db, dbErr := jobdb.Open(ctx, dbPath, jobdb.Options{Version: r.opts.Version, Logger: r.log})
	d := <-desc
	if d.err == nil && job.Reduce && !d.info.Reduce {
		d.err = errNoReduce
	}
	if d.err != nil {
		if dbErr == nil {
			// The job never started: a database this run made goes too.
			db.Close()
			if madeDB {
				removeDB(r.p.OutDir)
			}
		}
		return nil, pluginErr(ctx, job, d.err)
	}
	if errors.Is(dbErr, jobdb.ErrCorrupt) || errors.Is(dbErr, jobdb.ErrNewer) {
		// Damage that reading the earlier run's state did not meet (an
		// index): the database's check at opening found it.
		return nil, damaged(r.p.OutDir, dbErr)
	}
	if dbErr != nil {
		return nil, bad(dbErr)
	}
	r.db = db
	if r.opts.Stage != "" {
		if err := db.PutJobValue(jobdb.StageKey, r.opts.Stage); err != nil {
			db.Close()
			return nil, err
		}
	}
	info := d.info
	r.opts.Phase("plugin described, job database open")

	r.verifier = info.Verify
	r.rep = r.newReport(info)
	n := job.Tasks.Len()
	r.recs = newRecords(r, n)
	r.opts.Live.attach(r)
	var keep func(ctx context.Context, data []byte) (string, error)
	if ro := r.opts.Remote; ro != nil && ro.Store != nil {
		keep = func(ctx context.Context, data []byte) (string, error) {
			_, id, err := blocks.PutFile(ctx, ro.Store, bytes.NewReader(data), 0)
			return id.String(), err
		}
	}
	r.vc = vc.NewLazy(func() []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = job.Tasks.ID(i)
		}
		return ids
	}, keep, r.log)
	r.kick = make(chan struct{}, 1)
	r.marks = make([]uint8, n)
	// Every task the database holds as done is an earlier run's: marked
	// reused before any is written again. A row this run writes takes the
	// mark of its record (reused only for one taken from a report.json).
	if err := r.db.MarkReused(); err != nil {
		r.db.Close()
		return nil, err
	}
	var reused int
	if r.p.stream != nil {
		r.deferReuse()
	} else {
		reused = r.reuse(ctx)
	}
	if err := r.restoreVC(ctx); err != nil {
		r.db.Close()
		return nil, bad(fmt.Errorf("read the shared state of the earlier run: %w", err))
	}
	if err := r.scanFolders(n); err != nil {
		r.db.Close()
		return nil, err
	}
	r.mu.Lock()
	r.dirty = true
	r.mu.Unlock()
	jctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	r.stopRun = stopRun
	stopJournal := r.startJournal(stopRun)
	stopReplicas := r.startReplicas(jctx)
	defer stopReplicas()
	if r.opts.link != nil {
		stopLink := r.startLink()
		defer stopLink() // after the journal's end: it holds them all
	}
	r.opts.Events.Started(job.Tasks.Len(), reused)

	failed, stall := r.runTasks(jctx, workRoot)
	r.opts.Phase("tasks over")
	if !job.Reduce {
		// Nothing calls the plugin from here on: its processes end (and
		// their cgroups, network namespace and folders go) while the
		// journal closes and the report is written, not after them. The
		// deferred Close waits for this one.
		go r.pool.Close()
	}
	if dbErr := r.db.Err(); dbErr != nil && r.fault.Load() == nil {
		// The journal failed (a full disk): what reached the database
		// stays; the rerun resumes from it.
		stopJournal()
		r.db.Close()
		r.finish(report.StateInterrupted, dbErr.Error())
		err := fmt.Errorf("%w (free space, then run the same command again: the job resumes)", dbErr)
		if errors.Is(dbErr, jobdb.ErrFull) {
			// This machine's own disk, like a full output folder (exit 4).
			err = localDisk{err}
		}
		return r.rep, err
	}

	switch f := r.fault.Load(); {
	case f != nil:
		// This machine's disk: the report is kept if it can be written; a
		// rerun resumes from the last one that was.
		r.finish(report.StateFailed, f.Error())
		if err := r.end(stopJournal); err != nil {
			r.log.Warn("journal report", "err", err)
		}
		return r.rep, f
	case ctx.Err() != nil:
		r.finish(report.StateInterrupted, "interrupted")
		return r.rep, errors.Join(ctx.Err(), r.end(stopJournal))
	case errors.Is(context.Cause(jctx), ErrFenced):
		r.finish(report.StateInterrupted, "fenced off by a later owner")
		return r.rep, errors.Join(context.Cause(jctx), r.end(stopJournal))
	case stall != "":
		r.finish(report.StateFailed, stall)
		if err := r.end(stopJournal); err != nil {
			return r.rep, err
		}
		r.mu.Lock()
		left := job.Tasks.Len() - r.rep.Summary.Done - failed
		r.mu.Unlock()
		return r.rep, fmt.Errorf("%s: %w: %s (run it again to resume)", stall, ErrStalled, tasksWord(left)+" left undone")
	case failed > 0:
		msg := fmt.Sprintf("%d of %d tasks failed", failed, job.Tasks.Len())
		r.finish(report.StateFailed, msg)
		if err := r.end(stopJournal); err != nil {
			return r.rep, err
		}
		return r.rep, fmt.Errorf("%s: %w", msg, ErrTasksFailed)
	}
	if job.Reduce {
		if err := r.reduce(jctx, workRoot); err != nil {
			state := report.StateFailed
			if ctx.Err() != nil {
				state = report.StateInterrupted
			}
			r.finish(state, "reduce: "+err.Error())
			if jerr := r.end(stopJournal); jerr != nil {
				return r.rep, jerr
			}
			if ctx.Err() != nil {
				return r.rep, ctx.Err()
			}
			return r.rep, fmt.Errorf("reduce: %w: %w", err, ErrTasksFailed)
		}
		r.opts.Phase("reduce done")
	}
	r.finish(report.StateComplete, "")
	return r.rep, r.end(stopJournal)
}

// infoMemo names the form of the plugin's remembered Describe answer
// (pluginproto.PluginInfo as JSON): a new form takes a new name.
const infoMemo = "describe-v1"

// describe asks the plugin what it is. A run that starts no plugin on
// this machine (no local slots, no spot checks) takes the answer the
// same executable gave before (the digest pins its bytes), so that the
// plugin's start, confined, is not on the way to the first task; the
// peers check the plugin as they start it. Any other run asks the
// plugin, whose process then takes the first task, and remembers the
// answer.
func (r *runner) describe(ctx context.Context) (pluginproto.PluginInfo, error) {
	info, known := r.p.recallInfo()
	if known && !r.p.StartsPlugin(r.opts.Slots) {
		return info, nil
	}
	if known {
		return r.pool.Describe(ctx)
	}
	return describePlugin(ctx, r.pool, r.p, r.log)
}

// recallInfo is the plugin's Describe answer an earlier run remembered
// (known false: none).
func (p *Prepared) recallInfo() (info pluginproto.PluginInfo, known bool) {
	known = pluginbuild.RecallInfo(p.cacheDir, infoMemo, p.Plugin.Digest, &info)
	return info, known
}

// StartsPlugin says whether a run with slots local slots starts the
// plugin on this machine: to run tasks, for spot checks, or, with no
// local slots, only to ask it what it is when no earlier run remembered
// its answer (describe).
func (p *Prepared) StartsPlugin(slots int) bool {
	if slots > 0 || p.Spec.Verify.SpotCheck > 0 {
		return true
	}
	_, known := p.recallInfo()
	return !known
}

// newRunID is the run's name (report.Report.Run): the earlier run's, if
// this one resumes it, else a new random one.
func newRunID(prev *report.Report) string {
	if prev != nil && prev.Run != "" {
		return prev.Run
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
		Run:     newRunID(r.p.Previous),
		Node:    r.opts.Node,
		Plugin: report.Plugin{
			Path:    r.p.Plugin.Path,
			Digest:  r.p.Plugin.Digest.String(),
			Name:    info.Name,
			Version: info.Version,
		},
		Summary: report.Summary{Total: job.Tasks.Len()},
		// The tasks' records are r.recs: report.json gets them from the
		// job database.
	}
	return rep
}

// reuse marks as done the tasks that an earlier run of the same job
// finished and whose output (files, or inline in the job database) still
// matches its digest.
func (r *runner) reuse(ctx context.Context) int {
	prev := r.p.Previous
	if prev == nil {
		return 0
	}
	n, legacy := 0, 0
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		if legacy > 0 {
			r.log.Info("outputs of an earlier run checked against their digests of listing version 1 (p2pc before the length-prefixed listing); their records keep those digests", "tasks", legacy)
		}
	}()
	for _, done := range r.p.PreviousDone {
		i := done.Idx
		if i < 0 || i >= r.recs.Len() {
			continue
		}
		id := r.recs.ID(i)
		d, files, err := r.storedOutput(ctx, i, id)
		if err != nil || (d.ID != done.Digest && d.Legacy != done.Digest) {
			continue
		}
		if d.ID != done.Digest {
			legacy++ // recorded under the listing of version 1: kept as it is
		}
		if prev.Tasks == nil {
			// The job database holds the task's record as the earlier
			// run left it: done, with this output (marked reused at the
			// run's start: MarkReused).
			r.recs.setCold(i)
			if done.NoKey {
				// A row of a p2pc that kept no keys: the same job's.
				if err := r.db.PutKey(i, r.p.TaskKey(i)); err != nil {
					r.log.Warn("journal a task's key", "task", id, "err", err)
				}
			}
		} else {
			// A report.json of a p2pc that kept no database: the record
			// is journaled from it.
			old := &prev.Tasks[i]
			if old.ID != id {
				continue
			}
			t := r.recs.fresh(i)
			t.State, t.Peer, t.Attempts, t.Digest = report.TaskDone, old.Peer, old.Attempts, old.Digest
			t.Files, t.Reused = report.TaskFiles(id, files), true
			r.recs.set(i, t)
			r.touchLocked(i)
		}
		r.rep.Summary.Done++
		r.rep.Summary.Reused++
		n++
	}
	r.stored = nil
	r.p.PreviousDone = nil // read once
	if n > 0 {
		r.log.Info("reusing tasks of an earlier run", "done", n)
	}
	return n
}

// storedOutput digests task i's stored output: its folder, or else its
// inline output in the job database (none at all is an empty output),
// from what readStored read of all tasks at the first call. The digest of
// listing version 1 comes beside it: an earlier run may have recorded that.
func (r *runner) storedOutput(ctx context.Context, i int, id string) (outputs.Digests, []string, error) {
	dir := filepath.Join(r.p.OutDir, "tasks", id)
	if r.stored == nil {
		s, err := r.readStored(ctx)
		if err != nil {
			return outputs.Digests{}, nil, err
		}
		r.stored = s
	}
	if r.stored.folders[id] {
		return outputs.DigestAll(dir)
	}
	if d, ok := r.stored.inline[i]; ok {
		return d, []string{sdk.DataFile}, nil
	}
	return outputs.DigestInlineAll(nil), []string{}, nil
}

// tasksWord is "1 task", "2 tasks".
func tasksWord(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

func (r *runner) finish(state, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.State, r.rep.Error, r.rep.Finished = state, msg, time.Now().UTC()
	r.dirty = true
}

// end stops the journal, journals the last changes, closes the database
// and writes report.json. When the records that left memory are all in
// the spool, report.json is written from the spool while the database
// commits its last changes and closes, and goes in place once they are
// on disk: report.json never says more than job.db holds.
func (r *runner) end(stopJournal func()) error {
	defer r.opts.Ending()
	defer r.recs.spool.close()
	stopJournal()
	r.mu.Lock()
	err := r.journalLocked()
	if err != nil || !r.recs.spool.covers(r.recs) {
		r.mu.Unlock()
		if cerr := r.db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		r.opts.Phase("journal closed")
		r.mu.Lock()
		defer r.mu.Unlock()
		err = r.writeReport(context.Background())
		r.opts.Phase("report written (read back from the job database)")
		return err
	}
	type prepared struct {
		p   *report.Pending
		err error
	}
	done := make(chan prepared, 1)
	go func() {
		// r.mu is held until the report is written: nothing changes the
		// records under it.
		defer r.mu.Unlock()
		p, err := report.PrepareRaw(r.p.OutDir, r.rep, r.recs.spool.each(r.recs))
		done <- prepared{p, err}
	}()
	err = r.db.Close()
	r.opts.Phase("journal closed")
	rp := <-done
	r.opts.Phase("report prepared")
	switch {
	case err != nil:
		if rp.p != nil {
			rp.p.Abort()
		}
		return err
	case rp.err != nil:
		return rp.err
	}
	err = rp.p.Commit()
	r.opts.Phase("report written")
	return err
}

// writeReport writes report.json (r.mu held): the job's fields from
// r.rep, the tasks a record at a time, those no longer in memory from the
// job database.
func (r *runner) writeReport(ctx context.Context) error {
	ro, err := jobdb.OpenClosed(ctx, r.db.Path())
	if err != nil {
		return err
	}
	defer ro.Close()
	return report.WriteEach(r.p.OutDir, r.rep, func(yield func(*report.Task) error) error {
		return r.recs.each(ctx, ro, func(_ int, t *report.Task) error { return yield(t) })
	})
}

type nopEvents struct{}

func (nopEvents) Started(int, int)                     {}
func (nopEvents) TaskDone(string, bool)                {}
func (nopEvents) TaskRetry(string, string, error)      {}
func (nopEvents) TaskProgress(string, float64, string) {}
func (nopEvents) TaskPartial(string, []byte)           {}
func (nopEvents) Counts(Counts)                        {}
