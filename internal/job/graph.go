package job

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// A job with stages runs all its stages at once (graphrun.go): each stage
// is a flat job of its own in OUT/stages/<name> (its job.db and
// report.json), run by a runner of its own on the same local slots and
// peers, whose tasks see the outputs of the upstream tasks they need as
// inputs named needs/<stage>/<task id>/<file>. A stage whose needs are
// all `all` edges starts when its upstream stages are over, and its
// upstream outputs are inputs of the whole stage (in its job ID). A stage
// with an `each` or `group` need is streamed: it starts when its `all`
// upstream stages are over, holds every task back, and the graph
// releases task n as soon as the upstream tasks it needs are accepted,
// with their outputs as inputs of its own; they are in the task's key,
// checked at its release, so a rerun reuses every task whose plugin,
// params and inputs, upstream outputs included, are unchanged: a
// finished graph runs no task again, and a changed input reruns its
// downstream closure. docs/spec.md, "stages", tells the user's side;
// docs/design/stages.md why.

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
	// name and number of tasks (1-based index of total: the stages run at
	// once, so it is called from several goroutines); the Events it
	// returns (if not nil) replace Run.Events for that stage, and done is
	// called when the stage is over.
	Stage func(name string, index, total, tasks int) (ev Events, done func())
	// Live, if set, shows the run to a watcher (the web view).
	Live *GraphLive
}

// GraphReport is a job with stages' report.json: the stages and every
// task of every stage, in stage order.
type GraphReport struct {
	Format string        `json:"format"`
	Name   string        `json:"name"`
	State  string        `json:"state"` // complete, failed or interrupted
	Stages []StageReport `json:"stages"`
	// Tasks are every task of every stage in report.json; RunGraph's
	// report holds only those that failed or were blocked.
	Tasks []GraphTask `json:"tasks"`
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
		if r.p.taskInputs == nil || r.p.stream != nil {
			return // none, or a streamed stage's: its leases carry them
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
	if r.p.taskInputs == nil || r.p.stream != nil {
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
