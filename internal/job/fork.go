package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
	"github.com/p2pc/p2pc/spec"
)

// A job whose spec has `spawn:` runs as a fork tree (docs/design/fork.md):
// in rounds, each a flat job of its own in OUT/rounds/<n> (its job.db and
// report.json). A round runs every task that is ready: the spec's tasks
// first, then each child spawned in the last round, and each suspended
// parent whose children are all done. A task that waits for children not
// done yet ends its call suspended (pluginpb.Suspension): it holds no
// slot until it is run again, from the start, with its children's
// outputs and its checkpoint as inputs. A round's tasks are a function of
// the rounds before it, so a rerun after a kill builds the same rounds and
// resumes them like any job: no accepted task runs again.

// ForkFormat names the layout of a fork tree's report.json.
const ForkFormat = "p2pc-fork/1"

// SuspendedState is the state of a fork task waiting for its children.
const SuspendedState = "suspended"

// ForkOptions tune RunFork.
type ForkOptions struct {
	// Prepare prepares each round: its OutDir, if set, is the tree's
	// output folder (default: the spec's).
	Prepare PrepareOptions
	// Run runs each round. Its Ending is called once, when the tree is
	// over.
	Run RunOptions
	// Round, if set, is called before each round runs with its number
	// (from 0) and its number of tasks; the Events it returns (if not
	// nil) replace Run.Events for that round, and done is called when
	// the round is over.
	Round func(round, tasks int) (ev Events, done func())
}

// ForkReport is a fork tree's report.json: its rounds and every task of
// the tree, parents before their children.
type ForkReport struct {
	Format string        `json:"format"`
	Name   string        `json:"name"`
	State  string        `json:"state"` // complete, failed or interrupted
	Rounds []RoundReport `json:"rounds"`
	Tasks  []ForkTask    `json:"tasks"`
}

// RoundReport sums up one round.
type RoundReport struct {
	Round int    `json:"round"`
	JobID string `json:"job_id"`
	// Output is the round's output folder, relative to the tree's.
	Output    string `json:"output"`
	Tasks     int    `json:"tasks"`
	Done      int    `json:"done"`
	Suspended int    `json:"suspended"`
	Failed    int    `json:"failed"`
	// Ran counts the tasks this run executed, Reused those an earlier
	// run's results stood for.
	Ran    int `json:"ran"`
	Reused int `json:"reused"`
}

// ForkTask is one task of the tree.
type ForkTask struct {
	ID       string   `json:"id"`
	Parent   string   `json:"parent,omitempty"`
	Depth    int      `json:"depth"`
	Children []string `json:"children,omitempty"`
	State    string   `json:"state"` // done, failed, suspended or pending
	Error    string   `json:"error,omitempty"`
	// Rounds are the rounds the task ran in: one, and one more after
	// each suspension.
	Rounds []int    `json:"rounds,omitempty"`
	Files  []string `json:"files,omitempty"` // relative to the tree's output folder
}

// forkNode is a task of the tree as the driver keeps it.
type forkNode struct {
	ForkTask
	self     int // index in the tree's nodes
	parent   int // index of the parent node, -1 for a task of the spec
	index    int // spawn index in the parent
	params   map[string]any
	spawned  []json.RawMessage // the children's params, as the task gave them
	children []int
	ckpt     []byte
	hasCkpt  bool
	outs     []Input // the task's outputs, named spawn/out/<id>/<file>
}

// RunFork runs a fork tree (spec.Job.Spawn) and writes its report.json in
// its output folder. The error wraps ErrTasksFailed when tasks of the
// spec failed, and is otherwise as Run's.
func RunFork(ctx context.Context, js *spec.Job, opts ForkOptions) (*ForkReport, error) {
	out, lock, ending, err := lockJobsOut(js, opts.Prepare.OutDir, opts.Run.Ending, "a job whose tasks do not spawn")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	f := &ForkReport{Format: ForkFormat, Name: js.Name, State: report.StateComplete}
	nodes := make([]*forkNode, js.Tasks.Len())
	for i := range nodes {
		t := js.Tasks.At(i)
		nodes[i] = &forkNode{ForkTask: ForkTask{ID: t.ID, State: report.TaskPending}, self: i, parent: -1, params: t.Params}
	}
	var runErr error
	for r := 0; runErr == nil; r++ {
		failChildren(nodes)
		ready := readyNodes(nodes)
		if len(ready) == 0 {
			break
		}
		rr := RoundReport{Round: r, Output: roundDir(r), Tasks: len(ready)}
		runErr = runRound(ctx, js, out, r, &nodes, ready, &rr, opts)
		if errors.Is(runErr, ErrTasksFailed) {
			runErr = nil
		}
		f.Rounds = append(f.Rounds, rr)
	}
	for _, n := range nodes {
		f.Tasks = append(f.Tasks, n.ForkTask)
		if n.parent < 0 && n.State != report.TaskDone && f.State == report.StateComplete {
			f.State = report.StateFailed
		}
	}
	if runErr != nil {
		f.State = report.StateInterrupted
	}
	if err := writeJSONFile(out, f); err != nil && runErr == nil {
		runErr = err
	}
	ending()
	if runErr != nil {
		return f, runErr
	}
	if f.State == report.StateFailed {
		failed := 0
		for _, n := range nodes {
			if n.parent < 0 && n.State != report.TaskDone {
				failed++
			}
		}
		return f, fmt.Errorf("%w: %d of the spec's %d tasks", ErrTasksFailed, failed, js.Tasks.Len())
	}
	return f, nil
}

// lockJobsOut resolves and locks the output folder of a job run as jobs of
// its own in subfolders (a graph's stages, a tree's rounds): outDir, or
// the spec's. It refuses a folder that holds a flat job's job.db (what
// says which kind). ending is the run's Ending, or a no-op.
func lockJobsOut(js *spec.Job, outDir string, ending func(), what string) (string, *dirlock.Lock, func(), error) {
	out := js.Output
	if outDir != "" {
		var err error
		if out, err = filepath.Abs(outDir); err != nil {
			return "", nil, nil, bad(fmt.Errorf("output folder: %w", err))
		}
	}
	lock, _, err := lockOutDir(out)
	if err != nil {
		return "", nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(out, jobdb.FileName)); err == nil {
		lock.Release()
		return "", nil, nil, bad(fmt.Errorf("output folder %s holds %s (%s): choose another output folder", out, what, jobdb.FileName))
	}
	if ending == nil {
		ending = func() {}
	}
	return out, lock, ending, nil
}

func roundDir(r int) string { return "rounds/" + strconv.Itoa(r) }

// failChildren fails each suspended task that has a failed child, with
// the child's error. Children come after their parents in nodes, so one
// pass from the end carries a failure up to the root.
func failChildren(nodes []*forkNode) {
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if n.State != SuspendedState {
			continue
		}
		for _, c := range n.children {
			if ch := nodes[c]; ch.State == report.TaskFailed {
				n.State, n.Error = report.TaskFailed, fmt.Sprintf("child %s failed: %s", ch.ID, ch.Error)
				break
			}
		}
	}
}

// readyNodes are the tasks to run next: those never run, and those
// suspended whose children are all done.
func readyNodes(nodes []*forkNode) []int {
	var ready []int
	for i, n := range nodes {
		switch n.State {
		case report.TaskPending:
			ready = append(ready, i)
		case SuspendedState:
			done := true
			for _, c := range n.children {
				done = done && nodes[c].State == report.TaskDone
			}
			if done {
				ready = append(ready, i)
			}
		}
	}
	return ready
}

// runRound prepares and runs round r over the ready tasks, then reads
// their outcomes back into the tree (which grows by their children).
func runRound(ctx context.Context, js *spec.Job, out string, r int, tree *[]*forkNode, ready []int, rr *RoundReport, opts ForkOptions) error {
	nodes := *tree
	tasks := make([]spec.Task, len(ready))
	inputs := make([][]Input, len(ready))
	stateDir := filepath.Join(out, ".p2pc", "fork", strconv.Itoa(r))
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("round %d: %w", r, outDirErr(out, err))
	}
	for k, i := range ready {
		n := nodes[i]
		tasks[k] = spec.Task{ID: n.ID, Params: n.params}
		in, err := n.stateInput(stateDir)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		inputs[k] = append([]Input{in}, n.childOutputs(nodes)...)
	}
	sj := *js
	sj.Tasks, sj.Reduce = spec.TaskList(tasks), false
	popts := opts.Prepare
	popts.OutDir = filepath.Join(out, filepath.FromSlash(roundDir(r)))
	popts.Inputs = nil
	popts.TaskInputs = func(k int) []Input { return inputs[k] }
	p, err := Prepare(ctx, &sj, popts)
	if err != nil {
		return fmt.Errorf("round %d: %w", r, err)
	}
	defer p.Release()
	rr.JobID = p.ID.String()
	ropts := opts.Run
	ropts.Ending, ropts.Stage = nil, js.Name+"/round "+strconv.Itoa(r)
	if opts.Round != nil {
		ev, done := opts.Round(r, len(ready))
		if ev != nil {
			ropts.Events = ev
		}
		if done != nil {
			defer done()
		}
	}
	_, runErr := Run(ctx, p, ropts)
	if err := readRound(ctx, js, out, r, p.OutDir, tree, ready, rr); err != nil && runErr == nil {
		runErr = err
	}
	if err := writeTree(ctx, p.OutDir, *tree, ready, opts.Prepare.Version); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("round %d: %w", r, runErr)
	}
	return nil
}

// writeTree records the place in the tree of round's tasks in its job
// database (table tree).
func writeTree(ctx context.Context, dir string, nodes []*forkNode, ready []int, version string) error {
	rows := make([]jobdb.TreeRow, 0, len(ready))
	for _, i := range ready {
		n := nodes[i]
		rows = append(rows, jobdb.TreeRow{Task: n.ID, Parent: n.Parent, Depth: n.Depth, Children: n.Children, Suspended: n.State == SuspendedState})
	}
	db, err := jobdb.Open(context.WithoutCancel(ctx), filepath.Join(dir, jobdb.FileName), jobdb.Options{Version: version})
	if err != nil {
		return fmt.Errorf("record the tree: %w", err)
	}
	if err := db.PutTree(rows); err != nil {
		db.Close()
		return fmt.Errorf("record the tree: %w", err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("record the tree: %w", err)
	}
	return nil
}

// stateInput writes the task's pluginpb.ForkState into dir and returns it
// as the input the SDK reads.
func (n *forkNode) stateInput(dir string) (Input, error) {
	st := pluginpb.ForkState{Task: n.ID, Depth: n.Depth, Checkpoint: n.ckpt, HasCheckpoint: n.hasCkpt}
	for k, c := range n.spawned {
		st.Children = append(st.Children, pluginpb.ForkChild{ID: childID(n.ID, k), Params: c})
	}
	data, err := json.Marshal(st)
	if err != nil {
		return Input{}, fmt.Errorf("fork state of task %s: %w", n.ID, err)
	}
	path := filepath.Join(dir, n.ID+".json")
	if err := writeFileAtomic(path, data); err != nil {
		return Input{}, fmt.Errorf("fork state of task %s: %w", n.ID, err)
	}
	return Input{Name: pluginpb.ForkStatePrefix + n.ID + ".json", Path: path, Digest: digest.Sum(data)}, nil
}

// childOutputs are the outputs of n's children, named
// spawn/out/<child id>/<file>.
func (n *forkNode) childOutputs(nodes []*forkNode) []Input {
	var ins []Input
	for _, c := range n.children {
		ins = append(ins, nodes[c].outs...)
	}
	return ins
}

func childID(parent string, k int) string { return parent + "." + strconv.Itoa(k) }

// readRound reads the outcomes of round r's tasks from its job database:
// a task done is done or suspended (its inline result a suspension), a
// task failed is failed.
func readRound(ctx context.Context, js *spec.Job, out string, r int, dir string, nodes *[]*forkNode, ready []int, rr *RoundReport) error {
	ctx = context.WithoutCancel(ctx)
	db, err := jobdb.OpenClosed(ctx, filepath.Join(dir, jobdb.FileName))
	if err != nil {
		return fmt.Errorf("read round %d: %w", r, err)
	}
	defer db.Close()
	inlineRel := filepath.Join(".p2pc", "inline", "rounds", strconv.Itoa(r))
	inline := filepath.Join(out, inlineRel)
	if err := exportInline(ctx, db, inline); err != nil {
		return fmt.Errorf("read round %d: %w", r, err)
	}
	return db.EachTask(ctx, func(k int, t *report.Task) error {
		if k >= len(ready) {
			return fmt.Errorf("read round %d: task %d of %d", r, k, len(ready))
		}
		n := (*nodes)[ready[k]]
		if t.Reused {
			rr.Reused++
		} else if len(t.Attempts) > 0 {
			rr.Ran++
		}
		switch t.State {
		case report.TaskDone:
		case report.TaskFailed:
			n.State, n.Error, n.Rounds = report.TaskFailed, t.Error, append(n.Rounds, r)
			rr.Failed++
			return nil
		default:
			return nil // not run: the round was interrupted
		}
		n.Rounds = append(n.Rounds, r)
		root, rel := dir, filepath.Join(filepath.FromSlash(roundDir(r)))
		if _, err := os.Lstat(filepath.Join(dir, "tasks", t.ID)); err != nil {
			root, rel = inline, inlineRel
		}
		var files []Input
		var relFiles []string
		var susp *pluginpb.Suspension
		for _, f := range t.Files {
			path := filepath.Join(root, filepath.FromSlash(f))
			name := strings.TrimPrefix(f, "tasks/"+t.ID+"/")
			if name == sdk.DataFile {
				data, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("read round %d: output of task %s: %w", r, t.ID, err)
				}
				s, ok, err := pluginpb.DecodeSuspension(data)
				if err != nil {
					return fmt.Errorf("read round %d: task %s: %w", r, t.ID, err)
				}
				if ok {
					susp = s
					break
				}
			}
			d, err := digest.File(path)
			if err != nil {
				return fmt.Errorf("read round %d: output of task %s: %w", r, t.ID, err)
			}
			files = append(files, Input{Name: pluginpb.ForkOutPrefix + n.ID + "/" + name, Path: path, Digest: d})
			relFiles = append(relFiles, filepath.ToSlash(filepath.Join(rel, filepath.FromSlash(f))))
		}
		if susp != nil {
			rr.Suspended++
			return n.suspend(js, susp, nodes)
		}
		rr.Done++
		n.State, n.Error, n.outs, n.Files = report.TaskDone, "", files, relFiles
		return nil
	})
}

// suspend takes the suspension of node n: its new children join the tree,
// unless they break the job's limits, which fails n.
func (n *forkNode) suspend(js *spec.Job, s *pluginpb.Suspension, nodes *[]*forkNode) error {
	lim := js.Spawn
	switch {
	case len(s.Children) == 0:
		n.State, n.Error = report.TaskFailed, "spawn: the task was suspended without new children to wait for"
		return nil
	case n.Depth+1 > lim.MaxDepth:
		n.State, n.Error = report.TaskFailed, fmt.Sprintf("spawn: task %s at depth %d spawned children, beyond the job's max_depth %d (spawn.max_depth in the spec)", n.ID, n.Depth, lim.MaxDepth)
		return nil
	case len(n.spawned)+len(s.Children) > lim.MaxChildren:
		n.State, n.Error = report.TaskFailed, fmt.Sprintf("spawn: task %s spawned %d children, more than the job's max_children %d (spawn.max_children in the spec)", n.ID, len(n.spawned)+len(s.Children), lim.MaxChildren)
		return nil
	}
	for _, raw := range s.Children {
		var own map[string]any
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		if err := d.Decode(&own); err != nil || own == nil {
			n.State, n.Error = report.TaskFailed, fmt.Sprintf("spawn: child %d of task %s: params are not a JSON object", len(n.spawned), n.ID)
			return nil
		}
		params := make(map[string]any, len(js.Params)+len(own))
		for k, v := range js.Params {
			params[k] = v
		}
		for k, v := range own {
			params[k] = specValue(v)
		}
		k := len(n.spawned)
		id := childID(n.ID, k)
		*nodes = append(*nodes, &forkNode{ForkTask: ForkTask{ID: id, Parent: n.ID, Depth: n.Depth + 1, State: report.TaskPending},
			self: len(*nodes), parent: n.self, index: k, params: params})
		n.spawned = append(n.spawned, raw)
		n.children = append(n.children, len(*nodes)-1)
		n.Children = append(n.Children, id)
	}
	n.State, n.Error = SuspendedState, ""
	n.ckpt, n.hasCkpt = s.Checkpoint, s.HasCheckpoint
	return nil
}

// specValue turns a decoded JSON value into the types of spec params:
// json.Number into int64 (or float64), recursively.
func specValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = specValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = specValue(e)
		}
		return out
	}
	return v
}

// writeJSONFile writes v to out/report.json through a temporary file.
func writeJSONFile(out string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(out, report.FileName), append(data, '\n')); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// writeFileAtomic writes path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadForkReport reads the report.json of a fork tree in out; ok is false
// when out holds no such report.
func ReadForkReport(out string) (f *ForkReport, ok bool, err error) {
	f = &ForkReport{}
	if ok, err = readReportAs(out, ForkFormat, f); !ok || err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// readReportAs reads out/report.json into v if its format is format; ok
// is false when it is not, or there is no report.
func readReportAs(out, format string, v any) (ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(out, report.FileName))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	var head struct {
		Format string `json:"format"`
	}
	if json.Unmarshal(data, &head) != nil || head.Format != format {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("read %s: %w", filepath.Join(out, report.FileName), err)
	}
	return true, nil
}
