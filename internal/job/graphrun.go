package job

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/spec"
)

// graphRun is one run of a job with stages: every stage's run at once,
// and what flows between them. Its mu is taken by the stages' runs (their
// stageLink calls), under none of their locks; under mu the graph
// releases and drops the tasks of streamed stages, which takes their
// queues' locks and runners' locks.
//
// Lock order: graphRun.mu, then a stage's sched.Queue lock, then its
// runner.mu.
type graphRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	js     *spec.Job
	out    string
	opts   GraphOptions

	mu      sync.Mutex
	stages  []*stageRun // by index in js.Stages
	stopped string      // with on_failure: stop, the stage whose failure stopped the job
}

// stageRun is a stage's part of the graph's run (under graphRun.mu).
type stageRun struct {
	st    *spec.Stage
	order int // its place in js.StageOrder
	// streamed: the stage has an `each` or `group` need: its tasks are
	// released one by one.
	streamed bool
	// downstream: some stage needs this one: its outputs are kept as
	// inputs (files).
	downstream bool
	sr         StageReport
	// state and why are each task's state and, failed or blocked, why: a
	// byte a task, so that a graph of a million tasks stays small.
	state []uint8
	why   map[int]string
	files [][]Input // by task: its output files as inputs, named needs/<stage>/<id>/<file>
	// refs counts, by task, the downstream tasks of `each` and `group`
	// needs not released yet: at 0 its files are let go, unless keep (a
	// stage with an `all` need on this one reads them all when it starts).
	refs []uint8
	keep bool
	// waiting counts, by task, the upstream tasks of its `each` and
	// `group` needs not done yet; released says which tasks were.
	waiting  []int32
	released []bool
	// ctl releases and drops the tasks of the stage's run once it started
	// (nil before, and when it has nothing left to run).
	ctl     *stageControl
	started bool
	// blockedAll: an `all` need blocked every task not started.
	blockedAll bool
	// runnable are the tasks its run has.
	runnable runList
	// inlineDir makes the folder of its inline outputs (writeInline);
	// inlineNew: it was not there before.
	inlineDir sync.Once
	inlineErr error
	inlineNew bool
	over      chan struct{} // closed when the stage's run is over (or it never runs)
	live      *Live         // its run for a watcher (GraphOptions.Live; nil without)
}

// RunGraph runs a job with stages (spec.Job.Stages) and writes its
// report.json in the graph's output folder. The error wraps ErrTasksFailed
// when tasks failed or were blocked, and is otherwise as Run's.
func RunGraph(ctx context.Context, js *spec.Job, opts GraphOptions) (*GraphReport, error) {
	out, lock, ending, err := lockJobsOut(js, opts.Prepare.OutDir, opts.Run.Ending, "a job without stages")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g := &graphRun{ctx: gctx, cancel: cancel, js: js, out: out, opts: opts, stages: make([]*stageRun, len(js.Stages))}
	if opts.Run.Slots > 0 {
		g.opts.Run.slots = make(chan struct{}, opts.Run.Slots)
	}
	for k, si := range js.StageOrder() {
		g.stages[si] = newStageRun(js.Stages[si], k)
	}
	opts.Live.attach(g)
	for _, s := range g.stages {
		for _, nd := range s.st.Needs {
			up := g.stages[nd.Index]
			if !up.downstream {
				up.downstream = true
				up.files, up.refs = make([][]Input, up.n()), make([]uint8, up.n())
			}
			if nd.Kind == spec.EdgeAll {
				up.keep = true
				continue
			}
			for i := range s.n() {
				lo, hi := nd.Upstream(i, up.n())
				for u := lo; u < hi; u++ {
					up.refs[u]++
				}
			}
		}
	}
	errs := make([]error, len(js.Stages))
	var wg sync.WaitGroup
	for si, s := range g.stages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[si] = g.runStage(s)
		}()
	}
	wg.Wait()
	var runErr error
	for _, si := range js.StageOrder() {
		if err := errs[si]; err != nil && !errors.Is(err, ErrTasksFailed) && runErr == nil {
			runErr = err
		}
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	rep := &GraphReport{Format: GraphFormat, Name: js.Name, State: report.StateComplete}
	for _, si := range js.StageOrder() {
		s := g.stages[si]
		for i, st := range s.state {
			switch st {
			case taskDone:
				s.sr.Done++
			case taskFailed:
				s.sr.Failed++
			case taskBlocked:
				s.sr.Blocked++
			}
			if st == taskFailed || st == taskBlocked {
				// The report file lists every task; the report returned
				// those that did not finish, for the summary.
				rep.Tasks = append(rep.Tasks, GraphTask{Stage: s.st.Name(), ID: s.st.Job.Tasks.ID(i), State: stateNames[st], Error: s.why[i]})
			}
		}
		if s.sr.Failed+s.sr.Blocked > 0 && rep.State == report.StateComplete {
			rep.State = report.StateFailed
		}
	}
	if runErr != nil {
		rep.State = report.StateInterrupted
	}
	if err := g.writeReport(rep); err != nil && runErr == nil {
		runErr = err
	}
	ending()
	if runErr != nil {
		return rep, runErr
	}
	if rep.State == report.StateFailed {
		var failed, blocked int
		for _, s := range rep.Stages {
			failed, blocked = failed+s.Failed, blocked+s.Blocked
		}
		return rep, fmt.Errorf("%w: %d failed, %d blocked by them", ErrTasksFailed, failed, blocked)
	}
	return rep, nil
}

// Task states in stageRun.state.
const (
	taskPending uint8 = iota
	taskDone
	taskFailed
	taskBlocked
)

var stateNames = [...]string{report.TaskPending, report.TaskDone, report.TaskFailed, BlockedState}

func newStageRun(st *spec.Stage, order int) *stageRun {
	n := st.Job.Tasks.Len()
	s := &stageRun{
		st: st, order: order, state: make([]uint8, n), why: map[int]string{}, over: make(chan struct{}),
		sr: StageReport{Name: st.Name(), Output: filepath.ToSlash(filepath.Join("stages", st.Name())), Tasks: n},
	}
	for _, nd := range st.Needs {
		s.sr.Needs = append(s.sr.Needs, nd.String())
		if nd.Kind != spec.EdgeAll {
			s.streamed = true
		}
	}
	return s
}

// set gives task i of s state, and why.
func (s *stageRun) set(i int, state uint8, why string) {
	s.state[i] = state
	if why != "" {
		s.why[i] = why
	}
}

// n is the stage's number of tasks.
func (s *stageRun) n() int { return len(s.state) }

// runStage runs stage s once the stages of its `all` needs are over.
func (g *graphRun) runStage(s *stageRun) error {
	defer func() {
		g.mu.Lock()
		g.overLocked(s)
		g.mu.Unlock()
		close(s.over)
	}()
	for _, nd := range s.st.Needs {
		if nd.Kind != spec.EdgeAll {
			continue
		}
		select {
		case <-g.stages[nd.Index].over:
		case <-g.ctx.Done():
			return nil
		}
	}
	g.mu.Lock()
	runnable, shared := g.gateLocked(s)
	if s.streamed && runnable.n > 0 {
		s.waiting, s.released = make([]int32, s.n()), make([]bool, s.n())
		for i := range s.n() {
			for _, nd := range s.st.Needs {
				if nd.Kind == spec.EdgeAll {
					continue
				}
				up := g.stages[nd.Index]
				lo, hi := nd.Upstream(i, up.n())
				for u := lo; u < hi; u++ {
					if up.state[u] != taskDone {
						s.waiting[i]++
					}
				}
			}
		}
	}
	g.mu.Unlock()
	if runnable.n == 0 || g.ctx.Err() != nil {
		return nil
	}
	if err := g.run(s, runnable, shared); err != nil {
		if !errors.Is(err, ErrTasksFailed) {
			g.cancel(err)
		}
		return err
	}
	return nil
}

// gateLocked marks blocked the tasks of s that cannot run (an upstream
// task of an `all` need not done, or the job stopped) and returns the
// others, and the inputs every task of s sees (its `all` needs'
// outputs). A streamed stage runs all its tasks or none: those its
// `each` and `group` needs blocked are dropped as its run starts.
func (g *graphRun) gateLocked(s *stageRun) (runnable runList, shared []Input) {
	blocked := 0
	for i := range s.n() {
		if s.state[i] == taskBlocked {
			blocked++
			if s.streamed {
				runnable.add(i)
			} else {
				runnable.skip(i)
			}
			continue
		}
		if why := g.blockedByLocked(s, i, true); why != "" {
			s.set(i, taskBlocked, why)
			runnable.skip(i)
			continue
		}
		runnable.add(i)
	}
	if s.streamed && (runnable.n < s.n() || blocked == s.n()) {
		// An `all` need or a stop blocks every task of it: none runs.
		for i := range s.n() {
			if s.state[i] != taskBlocked {
				s.set(i, taskBlocked, g.blockedByLocked(s, i, true))
			}
		}
		return runList{}, nil
	}
	for _, nd := range s.st.Needs {
		if nd.Kind == spec.EdgeAll {
			for _, f := range g.stages[nd.Index].files {
				shared = append(shared, f...)
			}
		}
	}
	return runnable, shared
}

// runList lists the tasks of a stage that its run has, in order: task n
// of the run is task at(n) of the stage. While every task so far runs
// (the usual case) it is a count, not a list of a million.
type runList struct {
	n     int
	list  []int // nil: tasks 0..n-1
	holes bool  // some task was skipped: list holds them all
}

// add appends task i (the stage's tasks go in order).
func (l *runList) add(i int) {
	if l.holes {
		l.list = append(l.list, i)
	}
	l.n++
}

// skip leaves task i out.
func (l *runList) skip(int) {
	if !l.holes {
		l.holes, l.list = true, make([]int, l.n, l.n+1)
		for k := range l.list {
			l.list[k] = k
		}
	}
}

// at is the stage's index of task n of the run.
func (l *runList) at(n int) int {
	if !l.holes {
		return n
	}
	return l.list[n]
}

func (g *graphRun) stopReason() string {
	return fmt.Sprintf("not run: stage %s had failed tasks (on_failure: stop)", g.stopped)
}

// blockedByLocked says why task i of s cannot run ("" if it can, as far
// as its `all` needs go when allOnly): the first upstream task it needs
// that is not done.
func (g *graphRun) blockedByLocked(s *stageRun, i int, allOnly bool) string {
	for _, nd := range s.st.Needs {
		if allOnly && nd.Kind != spec.EdgeAll {
			continue
		}
		up := g.stages[nd.Index]
		lo, hi := nd.Upstream(i, up.n())
		for u := lo; u < hi; u++ {
			if why := up.upstreamWhy(u); why != "" {
				return why
			}
		}
	}
	if g.stopped != "" {
		return g.stopReason()
	}
	return ""
}

// upstreamWhy is why a task downstream of task i cannot run ("" if i is
// done).
func (s *stageRun) upstreamWhy(i int) string {
	switch s.state[i] {
	case taskDone:
		return ""
	case taskBlocked:
		return s.why[i]
	case taskFailed:
		return fmt.Sprintf("upstream task %s/%s failed: %s", s.st.Name(), s.st.Job.Tasks.ID(i), s.why[i])
	}
	return fmt.Sprintf("upstream task %s/%s did not finish", s.st.Name(), s.st.Job.Tasks.ID(i))
}

// run prepares and runs the runnable tasks of stage s.
func (g *graphRun) run(s *stageRun, runnable runList, shared []Input) error {
	st := s.st
	sj := *st.Job
	if runnable.n < st.Job.Tasks.Len() {
		tasks := make([]spec.Task, runnable.n)
		for n := range runnable.n {
			tasks[n] = st.Job.Tasks.At(runnable.at(n))
		}
		sj.Tasks = spec.TaskList(tasks)
	}
	popts := g.opts.Prepare
	popts.OutDir = filepath.Join(g.out, "stages", st.Name())
	popts.Inputs, popts.TaskInputs = shared, nil
	if s.streamed {
		popts.streamed = s.sr.Needs
	}
	p, err := Prepare(g.ctx, &sj, popts)
	if err != nil {
		return fmt.Errorf("stage %s: %w", st.Name(), err)
	}
	defer p.Release()
	g.mu.Lock()
	s.sr.JobID, s.runnable = p.ID.String(), runnable
	g.mu.Unlock()
	ropts := g.opts.Run
	ropts.Ending, ropts.Stage, ropts.Live = nil, g.js.Name+"/"+st.Name(), s.live
	ropts.link = &graphLink{g: g, s: s, runnable: &s.runnable}
	ropts.readOnly = []string{g.out}
	if g.opts.Stage != nil {
		ev, done := g.opts.Stage(st.Name(), s.order+1, len(g.js.Stages), runnable.n)
		if ev != nil {
			ropts.Events = ev
		}
		if done != nil {
			defer done()
		}
	}
	if _, err := Run(g.ctx, p, ropts); err != nil {
		return fmt.Errorf("stage %s: %w", st.Name(), err)
	}
	return nil
}

// graphLink is a stage's stageLink: n, the index of a task in the stage's
// run, is runnable.at(n) in the stage.
type graphLink struct {
	g        *graphRun
	s        *stageRun
	runnable *runList
}

func (l *graphLink) started(c *stageControl, reused []stageOutput) {
	g, s := l.g, l.s
	g.mu.Lock()
	defer g.mu.Unlock()
	s.ctl, s.started = c, true
	for _, out := range reused {
		g.doneLocked(s, l.runnable.at(out.Task), out)
	}
	if c == nil || !s.streamed {
		return
	}
	var drop []int
	for i := range s.n() {
		switch {
		case s.state[i] == taskBlocked:
			drop = append(drop, i)
		case s.waiting[i] == 0:
			g.releaseLocked(s, i)
		}
	}
	if len(drop) > 0 {
		c.Drop(drop...)
	}
}

func (l *graphLink) done(out stageOutput) {
	if l.s.downstream {
		// Its files as inputs downstream: out of the graph's lock, where
		// the stages' outputs are read and written at once.
		out.ins, out.insErr = l.g.inputsOf(l.s, out)
		out.prepared = true
	}
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	l.g.doneLocked(l.s, l.runnable.at(out.Task), out)
}

func (l *graphLink) failed(task int, err string) {
	g, s := l.g, l.s
	g.mu.Lock()
	defer g.mu.Unlock()
	i := l.runnable.at(task)
	s.set(i, taskFailed, err)
	g.blockDownstreamLocked(s, i, s.upstreamWhy(i))
	if g.js.OnFailure == spec.OnFailureStop && g.stopped == "" {
		g.stopped = s.st.Name()
		g.stopAllLocked()
	}
}

// doneLocked notes task i of s done with out, and releases the tasks
// downstream that wait for it alone.
func (g *graphRun) doneLocked(s *stageRun, i int, out stageOutput) {
	if s.state[i] == taskDone {
		return
	}
	s.set(i, taskDone, "")
	delete(s.why, i)
	if s.downstream {
		ins, err := out.ins, out.insErr
		if !out.prepared {
			ins, err = g.inputsOf(s, out)
		}
		if err != nil {
			// Its downstream tasks cannot see it: they are blocked.
			s.set(i, taskFailed, err.Error())
			g.blockDownstreamLocked(s, i, s.upstreamWhy(i))
			return
		}
		s.files[i] = ins
	}
	for _, d := range g.stages {
		if !d.streamed || d.waiting == nil {
			continue
		}
		for _, nd := range d.st.Needs {
			if nd.Kind == spec.EdgeAll || g.stages[nd.Index] != s {
				continue
			}
			j := i
			if nd.Kind == spec.EdgeGroup {
				j = i / nd.Group
			}
			if j >= d.n() {
				continue
			}
			if d.waiting[j]--; d.waiting[j] == 0 && d.ctl != nil && d.state[j] == taskPending {
				g.releaseLocked(d, j)
			}
		}
	}
}

// releaseLocked releases task i of streamed stage s with the upstream
// outputs it needs as inputs of its own; a task reused at its release
// is done at once. Upstream files no task waits for any more are let go.
func (g *graphRun) releaseLocked(s *stageRun, i int) {
	if s.released[i] {
		return
	}
	s.released[i] = true
	var ins []Input
	for _, nd := range s.st.Needs {
		if nd.Kind == spec.EdgeAll {
			continue
		}
		up := g.stages[nd.Index]
		lo, hi := nd.Upstream(i, up.n())
		for u := lo; u < hi; u++ {
			ins = append(ins, up.files[u]...)
			if up.refs[u]--; up.refs[u] == 0 && !up.keep {
				up.files[u] = nil
			}
		}
	}
	if out, reused := s.ctl.Release(g.ctx, i, ins); reused {
		g.doneLocked(s, i, out)
	}
}

// blockDownstreamLocked blocks, with why, every task downstream of task i
// of s that is not released yet, down the whole closure.
func (g *graphRun) blockDownstreamLocked(s *stageRun, i int, why string) {
	for _, d := range g.stages {
		for _, nd := range d.st.Needs {
			if g.stages[nd.Index] != s {
				continue
			}
			lo, hi := 0, d.n()
			switch nd.Kind {
			case spec.EdgeEach:
				lo, hi = i, i+1
			case spec.EdgeGroup:
				lo, hi = i/nd.Group, i/nd.Group+1
			default:
				if d.blockedAll {
					continue // every task of d is blocked already
				}
				d.blockedAll = true
			}
			for j := lo; j < min(hi, d.n()); j++ {
				g.blockLocked(d, j, why)
			}
		}
	}
}

// blockLocked blocks task j of d, if it did not start, and its closure.
func (g *graphRun) blockLocked(d *stageRun, j int, why string) {
	if d.state[j] != taskPending || d.released != nil && d.released[j] {
		return
	}
	if d.started && !d.streamed {
		return // running already: it saw the upstream outputs it needs
	}
	d.set(j, taskBlocked, why)
	if d.ctl != nil {
		d.ctl.Drop(j)
	}
	g.blockDownstreamLocked(d, j, why)
}

// stopAllLocked blocks every task not released yet (on_failure: stop).
func (g *graphRun) stopAllLocked() {
	why := g.stopReason()
	for _, d := range g.stages {
		if d.started && !d.streamed {
			continue
		}
		var drop []int
		for j := range d.n() {
			if d.state[j] != taskPending || d.released != nil && d.released[j] {
				continue
			}
			d.set(j, taskBlocked, why)
			drop = append(drop, j)
		}
		if d.ctl != nil && len(drop) > 0 {
			d.ctl.Drop(drop...)
		}
	}
}

// overLocked: the run of s is over. The tasks of it that did not finish
// block their downstream tasks, which would wait for them for ever.
func (g *graphRun) overLocked(s *stageRun) {
	s.ctl = nil
	for i, st := range s.state {
		if st != taskDone && st != taskFailed {
			g.blockDownstreamLocked(s, i, s.upstreamWhy(i))
		}
	}
}

// inputsOf is the output of task out.ID of s as inputs downstream: its
// files, or its inline data written out as OUT/.p2pc/inline/<stage>/<id>.data.
func (g *graphRun) inputsOf(s *stageRun, out stageOutput) ([]Input, error) {
	prefix := "needs/" + s.st.Name() + "/" + out.ID + "/"
	if out.Dir == "" {
		path := g.inlinePath(s, out.ID, out.Files[0])
		if err := s.writeInline(path, out.Data); err != nil {
			return nil, fmt.Errorf("output of task %s/%s: %w", s.st.Name(), out.ID, err)
		}
		return []Input{{Name: prefix + out.Files[0], Path: path, Digest: sha256.Sum256(out.Data)}}, nil
	}
	ins := make([]Input, 0, len(out.Files))
	for _, f := range out.Files {
		path := filepath.Join(out.Dir, filepath.FromSlash(f))
		d, err := digest.File(path)
		if err != nil {
			return nil, fmt.Errorf("output of task %s/%s: %w", s.st.Name(), out.ID, err)
		}
		ins = append(ins, Input{Name: prefix + f, Path: path, Digest: d})
	}
	return ins, nil
}

// inlinePath is where task id's inline output (the file name) of s is
// written out: one folder a stage, not one a task (a folder each would
// cost more than the task).
func (g *graphRun) inlinePath(s *stageRun, id, name string) string {
	return filepath.Join(g.out, ".p2pc", "inline", s.st.Name(), id+"."+name)
}

// writeInline writes data to path unless path holds it already. It
// writes in place: a file cut short by a crash holds other bytes, and is
// written again by the next run before any task downstream reads it.
// A folder this run made holds only what it wrote: no file is read
// first (most of the cost of a tiny output is its file's creation).
func (s *stageRun) writeInline(path string, data []byte) error {
	s.inlineDir.Do(func() {
		dir := filepath.Dir(path)
		_, err := os.Lstat(dir)
		s.inlineNew = errors.Is(err, fs.ErrNotExist)
		s.inlineErr = os.MkdirAll(dir, 0o755)
	})
	if s.inlineErr != nil {
		return s.inlineErr
	}
	if !s.inlineNew {
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			return nil
		}
	}
	return os.WriteFile(path, data, 0o644)
}

// writeReport writes the graph's report.json (through a temporary file):
// rep's fields, every stage, and every task of every stage with what its
// stage's job database says of it (attempts, reused, files), a task at a
// time; the states the graph decided (blocked) stand. The tasks are
// written first to a file of their own, the stages' counts (Ran,
// Reused) being known only then.
func (g *graphRun) writeReport(rep *GraphReport) error {
	tasksPath := filepath.Join(g.out, report.FileName+".tasks.tmp")
	defer os.Remove(tasksPath)
	f, err := os.Create(tasksPath)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	first := true
	for _, si := range g.js.StageOrder() {
		s := g.stages[si]
		err = g.eachTask(s, func(t *GraphTask) error {
			b, err := json.MarshalIndent(t, "    ", "  ")
			if err != nil {
				return err
			}
			if !first {
				w.WriteString(",")
			}
			first = false
			w.WriteString("\n    ")
			_, err = w.Write(b)
			return err
		})
		if err != nil {
			f.Close()
			return fmt.Errorf("write report: stage %s: %w", s.st.Name(), err)
		}
		rep.Stages = append(rep.Stages, s.sr)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	head := *rep
	head.Tasks = []GraphTask{}
	data, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	// The head ends with "tasks": []\n}: the tasks go between the brackets.
	cut := bytes.LastIndex(data, []byte("[]"))
	tmp := filepath.Join(g.out, report.FileName+".tmp")
	out, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	in, err := os.Open(tasksPath)
	if err == nil {
		ow := bufio.NewWriterSize(out, 1<<16)
		ow.Write(data[:cut+1])
		_, err = io.Copy(ow, in)
		in.Close()
		if !first {
			ow.WriteString("\n  ")
		}
		ow.Write(data[cut+1:])
		ow.WriteString("\n")
		err = errors.Join(err, ow.Flush())
	}
	if err = errors.Join(err, out.Close()); err == nil {
		err = os.Rename(tmp, filepath.Join(g.out, report.FileName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// eachTask calls fn with every task of s in order, as its stage's job
// database has it where the graph saw it run (counting s.sr.Ran and
// Reused), and as the graph has it otherwise.
func (g *graphRun) eachTask(s *stageRun, fn func(*GraphTask) error) error {
	st := s.st
	dir := filepath.Join(g.out, "stages", st.Name())
	var db *jobdb.DB
	if s.sr.JobID != "" {
		var err error
		if db, err = jobdb.OpenClosed(context.WithoutCancel(g.ctx), filepath.Join(dir, jobdb.FileName)); err != nil {
			return err
		}
		defer db.Close()
	}
	// Only a done task whose one file is sdk.DataFile may be inline: it
	// is, unless it has a folder (none has without OUT/stages/<name>/tasks).
	_, err := os.Lstat(filepath.Join(dir, "tasks"))
	folders := err == nil
	next := 0
	emit := func(upto int) error { // the graph's own record of tasks next..upto-1
		for ; next < upto; next++ {
			t := GraphTask{Stage: st.Name(), ID: st.Job.Tasks.ID(next), State: stateNames[s.state[next]], Error: s.why[next]}
			if err := fn(&t); err != nil {
				return err
			}
		}
		return nil
	}
	if db != nil {
		err := db.EachTask(context.WithoutCancel(g.ctx), func(n int, t *report.Task) error {
			if n >= s.runnable.n {
				return nil
			}
			i := s.runnable.at(n)
			if i < next {
				return nil
			}
			if err := emit(i); err != nil {
				return err
			}
			next = i + 1
			gt := GraphTask{Stage: st.Name(), ID: t.ID, State: stateNames[s.state[i]], Error: s.why[i]}
			if gt.State != t.State {
				// The graph saw every task done or failed in this run: a row
				// that says otherwise is an earlier run's (a streamed task
				// not released), or the run was cut short.
				return fn(&gt)
			}
			gt.Error, gt.Reused, gt.Attempts = t.Error, t.Reused, len(t.Attempts)
			if t.Reused {
				s.sr.Reused++
			} else if len(t.Attempts) > 0 {
				s.sr.Ran++
			}
			if t.State == report.TaskDone {
				inline := len(t.Files) == 1 && t.Files[0] == sdk.DataFile
				if inline && folders {
					_, err := os.Lstat(filepath.Join(dir, "tasks", t.ID))
					inline = err != nil
				}
				for _, f := range t.Files {
					path := filepath.Join("stages", st.Name(), filepath.FromSlash(f))
					if inline {
						path = filepath.Join(".p2pc", "inline", st.Name(), t.ID+"."+filepath.Base(f))
					}
					gt.Files = append(gt.Files, filepath.ToSlash(path))
				}
			}
			return fn(&gt)
		})
		if err != nil {
			return err
		}
	}
	return emit(s.n())
}
