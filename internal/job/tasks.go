package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// runTasks runs every pending task on the workers (local slots and, if a
// swarm is given, remote peers) and returns how many failed for good. It
// returns early when ctx ends, and when the no-progress watchdog gives
// up: stall then says why.
func (r *runner) runTasks(ctx context.Context, workRoot string) (failed int, stall string) {
	pending := make([]int, 0, r.recs.Len())
	r.mu.Lock()
	for i := range r.recs.Len() {
		if !r.recs.reused(i) {
			pending = append(pending, i)
		}
	}
	r.mu.Unlock()
	link := r.opts.link
	if len(pending) == 0 {
		if link != nil {
			link.started(nil, r.reusedOutputs(ctx))
		}
		return 0, ""
	}
	q := newQueue(r, pending, r.p.stream != nil)
	if link != nil {
		// A streamed stage's tasks are all held: the graph releases them.
		link.started(&stageControl{r: r, q: q}, r.reusedOutputs(ctx))
	}
	r.opts.Live.attachQueue(q)
	defer r.opts.Live.attachQueue(nil)
	var gate *handoverGate
	peers := &sessionList{}
	if r.p.Previous != nil && r.opts.Remote != nil && r.opts.Remote.Swarm != nil {
		// Before the first lease, the local slots' too.
		last := departed(lastSessions(ctx, r.db), r.opts.Departed)
		peers.change(r, true, last...) // they may still come
		gate = newHandoverGate(q, last, r.log, func(late []string) { peers.change(r, false, late...) })
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	q.SetSlots(r.opts.Node, min(r.opts.Slots, len(pending)))
	for slot := 0; slot < r.opts.Slots && slot < len(pending); slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.localWorker(wctx, q, workRoot, slot, false)
		}()
	}
	if r.opts.Slots == 0 && r.p.Spec.Verify.SpotCheck > 0 {
		// Spot checks run on this machine, the one party the submitter
		// trusts: with no local slots, one slot runs them and nothing else.
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.localWorker(wctx, q, workRoot, r.opts.Slots, true)
		}()
	}
	var sess *Session
	if r.opts.Remote != nil && r.opts.Remote.Swarm != nil {
		sess = &Session{r: r, q: q, workRoot: workRoot, runDone: wctx.Done(), started: time.Now(), over: make(chan struct{}), gate: gate, peers: peers}
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Publish the plugin and inputs before the first peer shows up.
			if _, err := sess.publish(wctx); err != nil && wctx.Err() == nil {
				r.log.Warn("publish job blocks; peers cannot take part", "err", err)
			}
		}()
		go func() {
			defer wg.Done()
			// Every platform is offered the job: Enrol gives each peer
			// its platform's plugin, or says why it gets no task.
			r.opts.Remote.Swarm.Serve(wctx, r.p.ID.String(), "", "", sess.Enrol)
		}()
	}
	// Backstop for workers that hang without their connection breaking.
	limit := r.p.Spec.Timeout + r.opts.LeaseGrace
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	dog := watchdog{after: r.opts.StallAfter, giveUp: r.opts.WaitPeers, log: r.log}
	if ro := r.opts.Remote; ro != nil {
		dog.unreached, _ = ro.Swarm.(unreacher)
	}
	counts := countsSender{r: r, q: q}
	defer counts.send(true)
	for {
		if all, _ := q.Done(); all {
			break
		}
		counts.send(false)
		select {
		case <-ctx.Done():
		case <-r.faulted:
		case <-q.Changed():
			continue
		case <-tick.C:
			q.Expire(limit)
			if stall = dog.check(q); stall == "" {
				continue
			}
		}
		break
	}
	if all, failed := q.Done(); all && ctx.Err() == nil {
		state := report.StateComplete
		if failed > 0 {
			state = report.StateFailed
		}
		sess.jobOver(ctx, state)
	}
	q.Close()
	stop()
	wg.Wait()
	if n := sess.takenOver(); n > 0 {
		r.log.Info("results of an earlier run taken over from peers that finished them meanwhile", "tasks", n)
	}
	q.SaveTrust()
	if q.Verifying() {
		peers := q.PeerReport()
		r.mu.Lock()
		r.rep.Peers = peers
		r.mu.Unlock()
	}
	_, failed = q.Done()
	return failed, stall
}

// countsSender sends Events.Counts at most every countsEvery (changed or
// not: a display that waits out a rate of its own then shows the latest),
// and when forced.
type countsSender struct {
	r  *runner
	q  *sched.Queue
	at time.Time
}

const countsEvery = 200 * time.Millisecond

func (c *countsSender) send(force bool) {
	if !force && time.Since(c.at) < countsEvery {
		return
	}
	c.at = time.Now()
	running := c.q.Running()
	c.r.mu.Lock()
	n := Counts{Total: c.r.rep.Summary.Total, Done: c.r.rep.Summary.Done, Failed: c.r.rep.Summary.Failed, Running: running}
	c.r.mu.Unlock()
	n.Queued = max(n.Total-n.Done-n.Failed-n.Running, 0)
	c.r.opts.Events.Counts(n)
}

// unreacher is a Swarm that can say which peers it was told of but
// cannot reach, and why (node.Swarm: the --join addresses).
type unreacher interface{ Unreached() string }

// watchdog watches a job for work that nobody takes: it says why once
// per stall period, and gives up when it has waited giveUp (0: never).
type watchdog struct {
	after     time.Duration
	giveUp    time.Duration
	unreached unreacher // may be nil
	log       *slog.Logger
	said      time.Time
}

// check returns why the job is given up, or "" to go on.
func (d *watchdog) check(q *sched.Queue) string {
	first := d.after
	if d.giveUp > 0 {
		first = min(first, d.giveUp)
	}
	why, stalled := q.Stalled(first)
	if !stalled {
		d.said = time.Time{}
		return ""
	}
	if d.unreached != nil {
		if u := d.unreached.Unreached(); u != "" {
			why += "; cannot reach " + u
		}
	}
	if d.giveUp > 0 {
		if _, over := q.Stalled(d.giveUp); over {
			why = fmt.Sprintf("%s; gave up after waiting %s for a peer that can take the work (--wait-peers)", why, d.giveUp)
			d.log.Info("giving up", "why", why) // the run's error says why
			return why
		}
	}
	if time.Since(d.said) >= d.after {
		d.said = time.Now()
		until := "for ever (--wait-peers 0)"
		if d.giveUp > 0 {
			until = fmt.Sprintf("up to %s (--wait-peers)", d.giveUp)
		}
		d.log.Warn("waiting for peers "+until, "why", why)
	}
	return ""
}

// localWorker runs leases on this machine's plugin pool until the queue
// drains or ctx ends; checkOnly, only trusted runs (spot checks). Tiny
// tasks run in batches (sched.Queue.BatchSize), as on a peer's slot.
func (r *runner) localWorker(ctx context.Context, q *sched.Queue, workRoot string, slot int, checkOnly bool) {
	next := func() (*sched.Lease, error) { return q.Next(ctx, r.opts.Node) }
	if checkOnly {
		next = func() (*sched.Lease, error) { return q.NextCheck(ctx) }
	}
	sw := &slotWork{dir: filepath.Join(workRoot, "local"+strconv.Itoa(slot))}
	defer os.RemoveAll(sw.dir)
	for {
		if err := r.leasable(ctx); err != nil {
			return
		}
		l, err := next()
		if err != nil {
			return
		}
		batch := []*sched.Lease{l}
		if !checkOnly && !l.Check {
			for n := q.BatchSize(r.opts.Node); len(batch) < n; {
				l := q.TryNext(r.opts.Node)
				if l == nil {
					break
				}
				batch = append(batch, l)
			}
			q.Batched(batch)
		}
		if r.opts.slots != nil {
			// The stages of a graph share this machine's slots: the batch
			// waits for one (the leases stay its; the run's end revokes
			// them).
			select {
			case r.opts.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		r.runLocal(ctx, sw, workRoot, batch, q.Finish)
		if r.opts.slots != nil {
			<-r.opts.slots
		}
	}
}

// slotWork is a local slot's work folder: made once and used from task
// to task while the tasks leave it empty, as a peer's slots do (making
// and removing a folder per task is most of a tiny task's cost on a disk).
type slotWork struct {
	dir  string
	made bool
}

// clear empties the folder after a task: a folder that is not empty (or
// was moved away) is removed, and made again for the next task.
func (sw *slotWork) clear() {
	if !sw.made || taskrun.EmptyDir(sw.dir) {
		return
	}
	os.RemoveAll(sw.dir)
	sw.made = false
}

// runLocal runs a batch of leases (often one) in the local pool, through
// the same path as a peer's slot (package taskrun), in the slot's work
// folder sw, checks each output with the plugin's Verify if it has one,
// as an output from a peer is checked, and hands each result to finish as
// soon as its task ends.
func (r *runner) runLocal(ctx context.Context, sw *slotWork, workRoot string, batch []*sched.Lease, finish func(*sched.Lease, sched.Result) bool) {
	items := make([]taskrun.Item, len(batch))
	for i, l := range batch {
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		l.OnRevoke(cancel)
		a := r.attempt(l, &leaseHost{r: r, l: l})
		// A staged output lives on with its vote, after the slot has moved
		// on: it gets a name of its own.
		a.Stage = filepath.Join(workRoot, l.TaskID+"."+strconv.FormatUint(l.ID, 10)+".out")
		if !r.verifier {
			// An inline output goes to the job database from memory; the
			// plugin's Verify, if it has one, reads the output as files.
			a.InlineMax = maxInlineOutput
		}
		items[i] = taskrun.Item{Ctx: actx, Attempt: a}
	}
	// The slot's folder, emptied before each plugin call; tasks of a
	// batch that leave it empty share it.
	next := func(clean bool) (string, error) {
		if !clean {
			sw.clear()
		}
		if !sw.made {
			if err := r.makeWork(sw.dir); err != nil {
				return "", r.outputFault(err)
			}
			sw.made = true
		}
		return sw.dir, nil
	}
	clean := false
	defer func() {
		if !clean {
			sw.clear()
		}
	}()
	clean = taskrun.RunBatch(ctx, r.pool, items, next, func(i int, out taskrun.Output) {
		l, actx := batch[i], items[i].Ctx
		if out.Outcome == report.OutcomeLost { // no work folder
			out.Outcome = pluginhost.Classify(actx, out.Err)
		}
		if out.Err != nil && actx.Err() == nil {
			// A plugin tells of a disk it could not write to only as text:
			// see whether the output folder still takes writes.
			if err := r.outputFault(out.Err); errors.Is(err, ErrLocalDisk) || errors.Is(r.probeOutput(), ErrLocalDisk) {
				out.Outcome = report.OutcomeCanceled // nobody's failure: the run stops
			}
		}
		if out.Err == nil && r.verifier {
			if err := r.verifyOutput(ctx, l, out.Stage, out.Files); err != nil {
				// A revoked lease (another copy won, or it expired) ends as canceled.
				out.Err, out.Outcome = err, pluginhost.Classify(actx, err)
				if errors.Is(err, errRejected) {
					out.Outcome = report.OutcomeRejected
				}
			}
		}
		res := sched.Result{Outcome: out.Outcome, Err: out.Err, Stage: out.Stage, Files: out.Files, Digest: out.Digest, Start: out.Start.UTC(), End: time.Now().UTC()}
		if out.Inline && out.Err == nil {
			res.Inline, res.Data, res.Files = true, out.Data, nil
			if out.Data != nil {
				res.Files = []string{sdk.DataFile}
			}
		}
		finish(l, res)
	})
}

// params are lease l's task params (canonical JSON): as its record
// held them when it was leased, else from the spec.
func (r *runner) params(l *sched.Lease) []byte {
	if len(l.Params) > 0 {
		return l.Params
	}
	return r.p.Spec.TaskParamsJSON(l.Task)
}

// attempt describes lease l for taskrun, on whichever slot it runs.
func (r *runner) attempt(l *sched.Lease, host sdk.Host) taskrun.Attempt {
	return taskrun.Attempt{
		JobID:   r.p.ID.String(),
		TaskID:  l.TaskID,
		Attempt: l.Attempt,
		Params:  r.params(l),
		Inputs:  r.inputFiles(l.Task),
		Timeout: r.p.Spec.Timeout,
		Host:    host,
		Disk:    sandbox.DefaultFileSize,
	}
}

// inputFiles are the inputs task sees: the job's, then its own.
func (r *runner) inputFiles(task int) []sdk.File {
	files := make([]sdk.File, len(r.p.Inputs))
	for i, in := range r.p.Inputs {
		files[i] = sdk.File{Name: in.Name, Path: in.Path}
	}
	return append(files, r.ownInputs(task)...)
}

// maxInlineOutput bounds an output kept in the job database: an output
// that is only the inline data file, up to this size, gets no folder.
const maxInlineOutput = 1 << 20

// place stores a complete output: an inline output (only the data file,
// or nothing), whether held in memory or staged, goes into the job
// database; anything else is renamed to OUT/tasks/<id>, replacing what
// an earlier run (or an earlier placing of this run) left there. The
// folder is thus either complete or absent. The queue's applier calls it
// (an Accept), one decision at a time, without the queue's lock. It
// returns the output as placed: inline (with its data) or a folder.
func (r *runner) place(task int, id string, out sched.Output) (sched.Output, error) {
	final := filepath.Join(r.p.OutDir, "tasks", id)
	if !out.Inline {
		data, ok, err := inlineStage(out.Stage, out.Files)
		if err != nil {
			return out, fmt.Errorf("store output of task %s: %w", id, err)
		}
		if ok {
			os.RemoveAll(out.Stage)
			out = sched.Output{Inline: true, Files: out.Files, Data: data}
		}
	}
	if out.Inline && len(out.Data) > maxInlineOutput {
		// Too large for the database (a peer's inline output may be):
		// it gets a folder like any output of files.
		stage, err := os.MkdirTemp(r.workRoot, id+".place-*")
		if err == nil {
			err = os.WriteFile(filepath.Join(stage, sdk.DataFile), out.Data, 0o644)
		}
		if err != nil {
			os.RemoveAll(stage)
			return out, r.outputFault(fmt.Errorf("store output of task %s: %w", id, err))
		}
		out = sched.Output{Stage: stage, Files: out.Files}
	}
	if out.Inline {
		var err error
		if len(out.Files) > 0 {
			err = r.db.PutOutput(task, sdk.DataFile, out.Data)
		} else {
			err = r.db.DeleteOutput(task)
		}
		if err != nil {
			r.dbFailed(err)
			return out, fmt.Errorf("store output of task %s: %w", id, err)
		}
		if r.mayHaveFolder(task) {
			if err := os.RemoveAll(final); err != nil { // an earlier run's files
				return out, fmt.Errorf("replace output of task %s: %w", id, err)
			}
		}
		return out, nil
	}
	if err := r.db.DeleteOutput(task); err != nil {
		r.dbFailed(err)
		return out, fmt.Errorf("store output of task %s: %w", id, err)
	}
	r.folders.placed[task] = true
	if os.Rename(out.Stage, final) == nil {
		return out, nil // the usual case: nothing there yet
	}
	if err := os.RemoveAll(final); err != nil {
		return out, r.outputFault(fmt.Errorf("replace output of task %s: %w", id, err))
	}
	if err := os.Rename(out.Stage, final); err != nil {
		return out, r.outputFault(fmt.Errorf("store output of task %s: %w", id, err))
	}
	return out, nil
}

// dbFailed stops the run when the job database failed (its errors are
// sticky: a full disk), at once rather than at the journal's next write,
// so that no task runs again only to find it full.
func (r *runner) dbFailed(err error) {
	if r.stopRun != nil && r.db.Err() != nil {
		r.stopRun(err)
	}
}

// taskFolders tells which tasks may have a folder OUT/tasks/<id>: none
// but those this run placed, when OUT/tasks was empty at the start.
type taskFolders struct {
	old    bool   // OUT/tasks held something at the start
	placed []bool // by task: this run placed a folder (by place, one at a time)
}

func (r *runner) mayHaveFolder(task int) bool { return r.folders.old || r.folders.placed[task] }

// scanFolders sets up r.folders for n tasks.
func (r *runner) scanFolders(n int) error {
	r.folders.placed = make([]bool, n)
	f, err := os.Open(filepath.Join(r.p.OutDir, "tasks"))
	if err != nil {
		return r.outputFault(fmt.Errorf("read tasks dir: %w", err))
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return r.outputFault(fmt.Errorf("read tasks dir: %w", err))
	}
	r.folders.old = len(names) > 0
	return nil
}

// inlineStage reads a staged output of files that is only the inline
// data file (data) or nothing at all (nil); ok is false for any other
// output.
func inlineStage(stage string, files []string) (data []byte, ok bool, err error) {
	switch {
	case len(files) == 0:
		return nil, true, nil
	case len(files) > 1 || files[0] != sdk.DataFile:
		return nil, false, nil
	}
	f, err := os.Open(filepath.Join(stage, sdk.DataFile))
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxInlineOutput {
		return nil, false, err
	}
	data = make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// taskHost relays the reduce step's callbacks to Events; the shared-state
// calls are for tasks only.
type taskHost struct {
	sdk.UnsupportedHost
	id string
	ev Events
}

func (h *taskHost) Progress(_ context.Context, fraction float64, note string) error {
	h.ev.TaskProgress(h.id, fraction, note)
	return nil
}

func (h *taskHost) Partial(_ context.Context, data []byte) error {
	h.ev.TaskPartial(h.id, data)
	return nil
}

// errRejected marks an output the plugin's own check rejected.
var errRejected = errors.New("rejected by the plugin's check")

// verifyOutput runs the plugin's Verify on a staged output. A rejection
// comes back wrapping errRejected.
func (r *runner) verifyOutput(ctx context.Context, l *sched.Lease, stage string, files []string) error {
	req := &sdk.VerifyRequest{
		JobID:  r.p.ID.String(),
		TaskID: l.TaskID,
		Params: r.p.Spec.TaskParamsJSON(l.Task),
		Inputs: r.inputFiles(l.Task),
	}
	for _, f := range files {
		req.Output = append(req.Output, sdk.File{Name: f, Path: filepath.Join(stage, filepath.FromSlash(f))})
	}
	err := r.pool.Verify(ctx, req, r.p.Spec.Timeout)
	if errors.Is(err, pluginproto.ErrRejected) {
		return fmt.Errorf("%w: %w", errRejected, err)
	}
	if err != nil {
		return fmt.Errorf("verify output: %w", err)
	}
	return nil
}

// makeWork makes an attempt's work folder, owned by the task user.
func (r *runner) makeWork(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	return sandbox.Own(dir, sandbox.Policy{User: r.opts.TaskUser})
}
