package job

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/spec"
)

// A job with stages runs stage after stage, in spec.Job.StageOrder: each
// stage is a flat job of its own in OUT/stages/<name> (its job.db and
// report.json), whose tasks see the outputs of the upstream tasks they
// need as inputs named needs/<stage>/<task id>/<file>. An upstream output
// that every task of the stage sees (edge all) is an input of the whole
// stage; one that task n alone sees (edges each and group) is an input of
// task n alone. Both are in the stage's job ID and in the keys of the
// tasks that see them, so a rerun reuses every task whose plugin, params
// and inputs, upstream outputs included, are unchanged: a finished graph
// runs no task again, and a changed input reruns its downstream closure.
// docs/spec.md, "stages", tells the user's side.

// BlockedState is the state of a task that did not run because a task it
// needs failed or was blocked (or, with on_failure: stop, because a stage
// before it had failed tasks).
const BlockedState = "blocked"

// GraphFormat names the layout of a graph's report.json.
const GraphFormat = "p2pc-graph/1"

// GraphOptions tune RunGraph.
type GraphOptions struct {
	// Prepare prepares each stage: its OutDir, if set, is the graph's
	// output folder (default: the spec's), and Inputs and TaskInputs are
	// RunGraph's own.
	Prepare PrepareOptions
	// Run runs each stage. Its Ending is called once, when the last stage
	// is over.
	Run RunOptions
	// Stage, if set, is called before each stage runs with the stage's
	// name and number of tasks (1-based index of total); the Events it
	// returns (if not nil) replace Run.Events for that stage, and done is
	// called when the stage is over.
	Stage func(name string, index, total, tasks int) (ev Events, done func())
}

// GraphReport is a job with stages' report.json: the stages and every
// task of every stage, in stage order.
type GraphReport struct {
	Format string        `json:"format"`
	Name   string        `json:"name"`
	State  string        `json:"state"` // complete, failed or interrupted
	Stages []StageReport `json:"stages"`
	Tasks  []GraphTask   `json:"tasks"`
}

// StageReport sums up one stage.
type StageReport struct {
	Name  string   `json:"name"`
	JobID string   `json:"job_id,omitempty"` // "" if no task of it ran
	Needs []string `json:"needs,omitempty"`
	// Output is the stage's output folder, relative to the graph's.
	Output  string `json:"output"`
	Tasks   int    `json:"tasks"`
	Done    int    `json:"done"`
	Failed  int    `json:"failed"`
	Blocked int    `json:"blocked"`
	// Ran counts the tasks this run executed, Reused those an earlier
	// run's results stood for.
	Ran    int `json:"ran"`
	Reused int `json:"reused"`
}

// GraphTask is one task of a stage.
type GraphTask struct {
	Stage    string   `json:"stage"`
	ID       string   `json:"id"`
	State    string   `json:"state"` // done, failed, blocked or pending
	Error    string   `json:"error,omitempty"`
	Reused   bool     `json:"reused,omitempty"`
	Attempts int      `json:"attempts"`
	Files    []string `json:"files,omitempty"` // relative to the graph's output folder
}

// stageState is what the stages downstream of a stage need of it.
type stageState struct {
	tasks []GraphTask
	files [][]Input // by task: its output files as inputs, named needs/<stage>/<id>/<file>
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
	g := &GraphReport{Format: GraphFormat, Name: js.Name, State: report.StateComplete}
	states := make([]*stageState, len(js.Stages))
	var runErr error
	stopped := "" // with on_failure: stop, the stage whose failures stopped the job
	for k, si := range js.StageOrder() {
		st := js.Stages[si]
		sr := StageReport{Name: st.Name(), Output: filepath.ToSlash(filepath.Join("stages", st.Name())), Tasks: st.Job.Tasks.Len()}
		for _, nd := range st.Needs {
			sr.Needs = append(sr.Needs, nd.String())
		}
		state := &stageState{tasks: make([]GraphTask, st.Job.Tasks.Len()), files: make([][]Input, st.Job.Tasks.Len())}
		states[si] = state
		runnable := gate(js, st, states, state, stopped)
		if len(runnable) > 0 && runErr == nil {
			err := runStage(ctx, js, out, st, states, state, runnable, &sr, k, opts)
			switch {
			case err == nil:
			case errors.Is(err, ErrTasksFailed):
				if js.OnFailure == spec.OnFailureStop && stopped == "" {
					stopped = st.Name()
				}
			default:
				runErr = err
			}
		}
		for _, t := range state.tasks {
			switch t.State {
			case report.TaskDone:
				sr.Done++
			case report.TaskFailed:
				sr.Failed++
			case BlockedState:
				sr.Blocked++
			}
		}
		if sr.Failed+sr.Blocked > 0 && g.State == report.StateComplete {
			g.State = report.StateFailed
		}
		g.Stages = append(g.Stages, sr)
		g.Tasks = append(g.Tasks, state.tasks...)
	}
	if runErr != nil {
		g.State = report.StateInterrupted
	}
	if err := writeGraphReport(out, g); err != nil && runErr == nil {
		runErr = err
	}
	ending()
	if runErr != nil {
		return g, runErr
	}
	if g.State == report.StateFailed {
		var failed, blocked int
		for _, s := range g.Stages {
			failed, blocked = failed+s.Failed, blocked+s.Blocked
		}
		return g, fmt.Errorf("%w: %d failed, %d blocked by them", ErrTasksFailed, failed, blocked)
	}
	return g, nil
}

// gate fills in the tasks of stage st that cannot run (blocked, with the
// reason) and returns the indexes of those that can: every upstream task
// they need is done.
func gate(js *spec.Job, st *spec.Stage, states []*stageState, state *stageState, stopped string) []int {
	var runnable []int
	for i := range st.Job.Tasks.Len() {
		t := &state.tasks[i]
		t.Stage, t.ID, t.State = st.Name(), st.Job.Tasks.ID(i), report.TaskPending
		if why := blockedBy(js, st, states, i); why != "" {
			t.State, t.Error = BlockedState, why
			continue
		}
		if stopped != "" {
			t.State, t.Error = BlockedState, fmt.Sprintf("not run: stage %s had failed tasks (on_failure: stop)", stopped)
			continue
		}
		runnable = append(runnable, i)
	}
	return runnable
}

// blockedBy says why task i of stage st cannot run ("" if it can): the
// first upstream task it needs that is not done.
func blockedBy(js *spec.Job, st *spec.Stage, states []*stageState, i int) string {
	for _, nd := range st.Needs {
		up := states[nd.Index]
		lo, hi := nd.Upstream(i, len(up.tasks))
		for u := lo; u < hi; u++ {
			switch t := up.tasks[u]; t.State {
			case report.TaskDone:
			case BlockedState:
				return t.Error
			case report.TaskFailed:
				return fmt.Sprintf("upstream task %s/%s failed: %s", t.Stage, t.ID, t.Error)
			default:
				return fmt.Sprintf("upstream task %s/%s did not finish", t.Stage, t.ID)
			}
		}
	}
	return ""
}

// runStage prepares and runs the runnable tasks of stage st, then reads
// their records back into state.
func runStage(ctx context.Context, js *spec.Job, out string, st *spec.Stage, states []*stageState, state *stageState, runnable []int, sr *StageReport, k int, opts GraphOptions) error {
	sj := *st.Job
	if len(runnable) < st.Job.Tasks.Len() {
		tasks := make([]spec.Task, len(runnable))
		for n, i := range runnable {
			tasks[n] = st.Job.Tasks.At(i)
		}
		sj.Tasks = spec.TaskList(tasks)
	}
	popts := opts.Prepare
	popts.OutDir = filepath.Join(out, "stages", st.Name())
	popts.Inputs, popts.TaskInputs = nil, nil
	own := false
	for _, nd := range st.Needs {
		if nd.Kind == spec.EdgeAll {
			for _, f := range states[nd.Index].files {
				popts.Inputs = append(popts.Inputs, f...)
			}
		} else {
			own = true
		}
	}
	if own {
		popts.TaskInputs = func(n int) []Input {
			i := runnable[n]
			var ins []Input
			for _, nd := range st.Needs {
				if nd.Kind == spec.EdgeAll {
					continue
				}
				up := states[nd.Index]
				lo, hi := nd.Upstream(i, len(up.tasks))
				for u := lo; u < hi; u++ {
					ins = append(ins, up.files[u]...)
				}
			}
			return ins
		}
	}
	p, err := Prepare(ctx, &sj, popts)
	if err != nil {
		return fmt.Errorf("stage %s: %w", st.Name(), err)
	}
	defer p.Release()
	sr.JobID = p.ID.String()
	ropts := opts.Run
	ropts.Ending, ropts.Stage = nil, js.Name+"/"+st.Name()
	if opts.Stage != nil {
		ev, done := opts.Stage(st.Name(), k+1, len(js.Stages), len(runnable))
		if ev != nil {
			ropts.Events = ev
		}
		if done != nil {
			defer done()
		}
	}
	_, runErr := Run(ctx, p, ropts)
	if err := readStage(ctx, out, st, p.OutDir, state, runnable, sr); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("stage %s: %w", st.Name(), runErr)
	}
	return nil
}

// readStage reads the records of the stage's tasks from its job database:
// their states, and their output files as the inputs of the stages
// downstream. Inline outputs (kept in the database) are written out under
// OUT/.p2pc/inline/<stage>, where the tasks downstream read them.
func readStage(ctx context.Context, out string, st *spec.Stage, dir string, state *stageState, runnable []int, sr *StageReport) error {
	ctx = context.WithoutCancel(ctx)
	db, err := jobdb.OpenClosed(ctx, filepath.Join(dir, jobdb.FileName))
	if err != nil {
		return fmt.Errorf("read stage %s: %w", st.Name(), err)
	}
	defer db.Close()
	inline := filepath.Join(out, ".p2pc", "inline", st.Name())
	if err := exportInline(ctx, db, inline); err != nil {
		return fmt.Errorf("read stage %s: %w", st.Name(), err)
	}
	sums := map[string]digest.ID{}
	return db.EachTask(ctx, func(n int, t *report.Task) error {
		if n >= len(runnable) {
			return fmt.Errorf("read stage %s: task %d of %d", st.Name(), n, len(runnable))
		}
		i := runnable[n]
		gt := &state.tasks[i]
		gt.State, gt.Error, gt.Reused, gt.Attempts = t.State, t.Error, t.Reused, len(t.Attempts)
		if t.Reused {
			sr.Reused++
		} else if len(t.Attempts) > 0 {
			sr.Ran++
		}
		if t.State != report.TaskDone {
			return nil
		}
		root, rel := dir, filepath.Join("stages", st.Name())
		if _, err := os.Lstat(filepath.Join(dir, "tasks", t.ID)); err != nil {
			root, rel = inline, filepath.Join(".p2pc", "inline", st.Name())
		}
		for _, f := range t.Files {
			path := filepath.Join(root, filepath.FromSlash(f))
			d, ok := sums[path]
			if !ok {
				if d, err = digest.File(path); err != nil {
					return fmt.Errorf("read stage %s: output of task %s: %w", st.Name(), t.ID, err)
				}
				sums[path] = d
			}
			name := strings.TrimPrefix(f, "tasks/"+t.ID+"/")
			state.files[i] = append(state.files[i], Input{Name: "needs/" + st.Name() + "/" + t.ID + "/" + name, Path: path, Digest: d})
			gt.Files = append(gt.Files, filepath.ToSlash(filepath.Join(rel, filepath.FromSlash(f))))
		}
		return nil
	})
}

// exportInline writes the inline outputs of db to dir/tasks/<id>/<name>
// where the file there is missing or holds other bytes. A file cut short
// by a crash is found so by the next run, which writes it again before
// any task downstream reads it.
func exportInline(ctx context.Context, db *jobdb.DB, dir string) error {
	err := db.Outputs(ctx, func(o jobdb.Output) error {
		path, err := jobdb.OutputPath(dir, o)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, o.Data) {
			return nil
		}
		return os.WriteFile(path, o.Data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("inline outputs: %w", err)
	}
	return nil
}

// writeGraphReport writes g to out/report.json through a temporary file.
func writeGraphReport(out string, g *GraphReport) error { return writeJSONFile(out, g) }

// ReadGraphReport reads the report.json of a job with stages in out; ok
// is false when out holds no such report (a flat job's, or none).
func ReadGraphReport(out string) (g *GraphReport, ok bool, err error) {
	g = &GraphReport{}
	if ok, err = readReportAs(out, GraphFormat, g); !ok || err != nil {
		return nil, false, err
	}
	return g, true, nil
}

// withInputs is key k followed by the inputs of a task of its own.
func withInputs(k [32]byte, ins []Input) [32]byte {
	if len(ins) == 0 {
		return k
	}
	h := sha256.New()
	h.Write(k[:])
	for _, in := range ins {
		writeField(h.Write, []byte(in.Name))
		h.Write(in.Digest[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// withTaskInputs is job ID id followed by every task's inputs of its own.
func (p *Prepared) withTaskInputs(id digest.ID) digest.ID {
	h := sha256.New()
	h.Write([]byte("p2pc-job-task-inputs-v1\n"))
	h.Write(id[:])
	for i := range p.Spec.Tasks.Len() {
		ins := p.taskInputs(i)
		h.Write(binary.AppendUvarint(nil, uint64(len(ins))))
		for _, in := range ins {
			writeField(h.Write, []byte(in.Name))
			h.Write(in.Digest[:])
		}
	}
	var out digest.ID
	h.Sum(out[:0])
	return out
}

// ownFiles are the inputs tasks see of their own, as the hello names
// them, after the job's: each file once, by name.
type ownFiles struct {
	once  sync.Once
	files []jobFile
	index map[string]uint32 // by name: the index in files
}

// ownFiles lists the inputs tasks see of their own (once per run).
func (r *runner) ownFiles() *ownFiles {
	r.own.once.Do(func() {
		if r.p.taskInputs == nil {
			return
		}
		r.own.index = map[string]uint32{}
		for i := range r.p.Spec.Tasks.Len() {
			for _, in := range r.p.taskInputs(i) {
				if _, ok := r.own.index[in.Name]; !ok {
					r.own.index[in.Name] = uint32(len(r.own.files))
					r.own.files = append(r.own.files, jobFile{in.Name, in.Path, in.Digest})
				}
			}
		}
	})
	return &r.own
}

// ownInputIndexes names task's own inputs for its lease (Lease.inputs).
func (r *runner) ownInputIndexes(task int) []uint32 {
	if r.p.taskInputs == nil {
		return nil
	}
	own := r.ownFiles()
	ins := r.p.taskInputs(task)
	idx := make([]uint32, len(ins))
	for i, in := range ins {
		idx[i] = own.index[in.Name]
	}
	return idx
}

// ownInputs are the inputs task sees of its own (none for a flat job).
func (r *runner) ownInputs(task int) []sdk.File {
	if r.p.taskInputs == nil {
		return nil
	}
	ins := r.p.taskInputs(task)
	files := make([]sdk.File, len(ins))
	for i, in := range ins {
		files[i] = sdk.File{Name: in.Name, Path: in.Path}
	}
	return files
}
