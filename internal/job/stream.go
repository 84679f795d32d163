package job

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The runner's side of a stage in a graph (graph.go). A stage's run tells
// its graph of every task done (accepted and placed in this run, or
// reused) and every task failed, through its stageLink. The run of a
// streamed stage (one with `each` or `group` needs) holds every task
// back until the graph releases it, with its own inputs (the upstream
// outputs it needs), or drops it (blocked). Whether an earlier run's
// output of a streamed task stands is decided at its release: its key is
// known only then.

// stageLink ties a stage's run to its graph. Its methods are called under
// no lock of the run's: they must not block on the run.
type stageLink interface {
	// started: the run's queue q exists (nil when no task of the stage is
	// left to run), and reused are the tasks an earlier run's results
	// stand for. A streamed stage's tasks wait for release (control).
	started(c *stageControl, reused []stageOutput)
	// done: task is accepted, its output placed.
	done(out stageOutput)
	// failed: task failed for good.
	failed(task int, err string)
}

// stageOutput is a done task's output as a downstream task sees it:
// the files of its folder (Dir), or its inline data.
type stageOutput struct {
	Task  int
	ID    string
	Dir   string   // the task's output folder; "" for an inline output
	Files []string // relative to Dir (or sdk.DataFile for an inline output)
	Data  []byte   // the inline output (Files is [data]); nil for a folder
	// ins are the graph's: its files as inputs downstream (prepared),
	// or why not.
	ins      []Input
	insErr   error
	prepared bool
}

// stageControl lets the graph release and drop the held tasks of a
// streamed stage's run.
type stageControl struct {
	r *runner
	q *sched.Queue
}

// streamInputs are the inputs of each task of a streamed stage of its
// own, set as the graph releases the task (Prepared.taskInputs), by task:
// only the tasks released and not done yet, not a slice of every task.
type streamInputs struct {
	mu  sync.Mutex
	ins map[int][]Input
}

func (s *streamInputs) get(i int) []Input {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ins[i]
}

func (s *streamInputs) set(i int, ins []Input) {
	s.mu.Lock()
	if ins == nil {
		delete(s.ins, i)
	} else {
		s.ins[i] = ins
	}
	s.mu.Unlock()
}

// streamedID is the job ID of a streamed stage: id (its spec, plugin and
// the inputs every task sees) and its needs. The tasks' own inputs are
// not in it (they are not known when the stage starts): they are in
// each task's key, checked when the task is released.
func streamedID(id digest.ID, needs []string) digest.ID {
	h := sha256.New()
	h.Write([]byte("p2pc-job-streamed-v1\n"))
	h.Write(id[:])
	for _, n := range needs {
		writeField(h.Write, []byte(n))
	}
	var out digest.ID
	h.Sum(out[:0])
	return out
}

// Release makes task i runnable with ins, the inputs of its own, unless
// an earlier run's output of it stands (its key, inputs included, is
// unchanged and its output still matches its digest): then the task is
// done, reused, and Release returns its output (ok true).
func (c *stageControl) Release(ctx context.Context, i int, ins []Input) (out stageOutput, ok bool) {
	r := c.r
	r.p.stream.set(i, ins)
	if out, ok := r.reuseReleased(ctx, i); ok {
		c.q.Drop(i)
		r.opts.Events.TaskDone(out.ID, true)
		return out, true
	}
	c.q.Release(i)
	return stageOutput{}, false
}

// Drop takes held tasks out of the run: they will not run (blocked).
func (c *stageControl) Drop(tasks ...int) {
	c.r.mu.Lock()
	for _, i := range tasks {
		delete(c.r.deferred, i)
	}
	c.r.mu.Unlock()
	c.q.Drop(tasks...)
}

// deferReuse keeps an earlier run's done tasks of a streamed stage for
// the check at their release (reuse, for a streamed stage): a row
// without a key cannot be checked, and its task runs again.
func (r *runner) deferReuse() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deferred = map[int]DoneTask{}
	for _, d := range r.p.PreviousDone {
		if d.Idx >= 0 && d.Idx < r.recs.Len() && d.Key != ([32]byte{}) {
			r.deferred[d.Idx] = d
		}
	}
	r.p.PreviousDone = nil
}

// reuseReleased reuses task i, just released, if an earlier run left its
// output under the same key.
func (r *runner) reuseReleased(ctx context.Context, i int) (stageOutput, bool) {
	r.mu.Lock()
	d, ok := r.deferred[i]
	if !ok {
		r.mu.Unlock()
		return stageOutput{}, false
	}
	delete(r.deferred, i)
	id := r.recs.ID(i)
	if d.Key != r.p.TaskKey(i) {
		r.mu.Unlock()
		return stageOutput{}, false
	}
	got, files, err := r.storedOutput(ctx, i, id)
	if err != nil || got.ID != d.Digest {
		r.mu.Unlock()
		return stageOutput{}, false
	}
	// The job database holds the task's record as the earlier run left
	// it: done, marked reused at the run's start.
	r.recs.setCold(i)
	r.rep.Summary.Done++
	r.rep.Summary.Reused++
	r.dirty = true
	if len(r.deferred) == 0 {
		r.stored = nil
	}
	r.mu.Unlock()
	r.wake()
	out, err := r.outputOf(ctx, i, id, files)
	if err != nil {
		r.log.Warn("read a reused task's output", "task", id, "err", err)
	}
	return out, true
}

// outputOf is done task i's output, as stored: its folder's files, or
// its inline data from the job database.
func (r *runner) outputOf(ctx context.Context, i int, id string, files []string) (stageOutput, error) {
	out := stageOutput{Task: i, ID: id}
	if len(files) == 1 && files[0] == sdk.DataFile {
		_, data, found, err := r.db.Output(ctx, i)
		if err != nil {
			return out, err
		}
		if found {
			out.Files, out.Data = files, data
			return out, nil
		}
	}
	out.Dir, out.Files = r.taskDir(id), files
	return out, nil
}

// reusedOutputs lists the outputs of the tasks reused at the run's start
// (a stage that is not streamed), for the graph.
func (r *runner) reusedOutputs(ctx context.Context) []stageOutput {
	r.mu.Lock()
	var reused []int
	for i := range r.recs.Len() {
		if r.recs.reused(i) {
			reused = append(reused, i)
		}
	}
	r.mu.Unlock()
	if len(reused) == 0 {
		return nil
	}
	inline := map[int][]byte{} // one pass over the job database
	err := r.db.Outputs(ctx, func(o jobdb.Output) error {
		inline[o.Idx] = o.Data
		return nil
	})
	if err != nil {
		r.log.Warn("read the reused tasks' inline outputs", "err", err)
	}
	outs := make([]stageOutput, 0, len(reused))
	for _, i := range reused {
		id := r.recs.ID(i)
		if data, ok := inline[i]; ok {
			outs = append(outs, stageOutput{Task: i, ID: id, Files: []string{sdk.DataFile}, Data: data})
			continue
		}
		dir := r.taskDir(id)
		_, files, err := outputs.Digest(dir)
		if errors.Is(err, fs.ErrNotExist) {
			files, err = []string{}, nil // an empty output
		}
		if err != nil {
			r.log.Warn("read a reused task's output", "task", id, "err", err)
			continue
		}
		outs = append(outs, stageOutput{Task: i, ID: id, Dir: dir, Files: files})
	}
	return outs
}

// linkPlaced notes task's output as placed, for the Done that follows
// (linkDone).
func (r *runner) linkPlaced(task int, id string, out sched.Output) {
	so := stageOutput{Task: task, ID: id, Files: out.Files}
	if out.Inline {
		so.Data = out.Data
		if so.Data == nil {
			so.Data = []byte{}
		}
	} else {
		so.Dir = r.taskDir(id)
	}
	r.linkMu.Lock()
	if r.linkOut == nil {
		r.linkOut = map[int]stageOutput{}
	}
	r.linkOut[task] = so
	r.linkMu.Unlock()
}

// linkDone tells the graph task is over, once the journal pass that
// holds its record is committed: a task downstream never runs on an
// output that a rerun after a crash would not find accepted.
func (r *runner) linkDone(d sched.Done) {
	if v := r.p.Spec.Verify; d.OK && r.p.stream != nil && v.Replicas <= 1 && v.SpotCheck == 0 {
		// Its inputs are in its key and record now: let them go (a
		// verified job may reopen a task, which runs with them again).
		r.p.stream.set(d.Task, nil)
	}
	r.linkMu.Lock()
	out, ok := r.linkOut[d.Task]
	delete(r.linkOut, d.Task)
	if !d.OK || ok {
		r.linkWait = append(r.linkWait, linkNote{need: r.durable.passes.Load() + 1, task: d.Task, ok: d.OK, err: d.Err, out: out})
	}
	r.linkMu.Unlock()
	if d.OK && !ok {
		r.log.Warn("a task is done without its output placed", "task", d.TaskID)
		return
	}
	select {
	case r.linkKick <- struct{}{}:
	default:
	}
}

// linkNote is a task over, told to the graph once durable.
type linkNote struct {
	need uint64 // the journal pass that holds it
	task int
	ok   bool
	err  string
	out  stageOutput
}

// tellLink tells the graph of the tasks over whose journal pass is
// committed (all of them with all), in the order they were over.
func (r *runner) tellLink(all bool) {
	committed := r.durable.committed.Load()
	r.linkMu.Lock()
	n := 0
	for n < len(r.linkWait) && (all || r.linkWait[n].need <= committed) {
		n++
	}
	notes := slices.Clone(r.linkWait[:n])
	r.linkWait = slices.Delete(r.linkWait, 0, n)
	r.linkMu.Unlock()
	for _, nt := range notes {
		if nt.ok {
			r.opts.link.done(nt.out)
		} else {
			r.opts.link.failed(nt.task, nt.err)
		}
	}
}

// startLink tells the graph of tasks over as the journal commits them,
// until stop; stop tells it of the rest (the database holds them all by
// then, or the run failed).
func (r *runner) startLink() (stop func()) {
	r.linkKick = make(chan struct{}, 1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			moved := r.durable.watch()
			r.tellLink(false)
			select {
			case <-moved:
			case <-r.linkKick:
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		r.tellLink(true)
	}
}

// taskDir is task id's output folder.
func (r *runner) taskDir(id string) string {
	return filepath.Join(r.p.OutDir, "tasks", id)
}

// leaseFiles are the inputs of its own that a lease of task carries to a
// peer (a streamed stage's: its hello cannot name them), each put into
// the block store once per run. An input that cannot be put is left
// out, and logged: the task then fails on the peer for want of it.
func (r *runner) leaseFiles(ctx context.Context, task int) []*peerpb.FileRef {
	if r.p.stream == nil {
		return nil
	}
	ins := r.p.stream.get(task)
	refs := make([]*peerpb.FileRef, 0, len(ins))
	for _, in := range ins {
		ref, err := r.leaseRefs.put(ctx, r, in)
		if err != nil {
			r.log.Warn("publish an input of a task", "task", r.recs.ID(task), "input", in.Name, "err", err)
			continue
		}
		refs = append(refs, ref)
	}
	return refs
}

// fileRefs are the inputs put into the block store for leases, by path.
type fileRefs struct {
	mu   sync.Mutex
	refs map[string]*peerpb.FileRef
}

func (f *fileRefs) put(ctx context.Context, r *runner, in Input) (*peerpb.FileRef, error) {
	f.mu.Lock()
	ref, ok := f.refs[in.Path]
	f.mu.Unlock()
	if ok && bytes.Equal(ref.Digest, in.Digest[:]) {
		return ref, nil
	}
	m, id, err := r.putFile(ctx, r.opts.Remote.Store, jobFile{in.Name, in.Path, in.Digest}, false)
	if err != nil {
		return nil, r.storeFault(r.opts.Remote.Store, err)
	}
	ref = &peerpb.FileRef{Name: in.Name, FileId: id[:], Size: m.Size, Digest: in.Digest[:]}
	f.mu.Lock()
	if f.refs == nil {
		f.refs = map[string]*peerpb.FileRef{}
	}
	f.refs[in.Path] = ref
	f.mu.Unlock()
	return ref, nil
}
