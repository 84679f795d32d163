package spec

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Limits and defaults of the spec format. docs/spec.md explains each.
const (
	// MaxSize is the largest spec file accepted, in bytes.
	MaxSize = 1 << 20
	// MaxTasks is the largest number of tasks a spec may expand to.
	MaxTasks = 1_000_000
	// MaxParamBytes bounds the params of all tasks together, as the JSON
	// objects that TaskParamsJSON returns.
	MaxParamBytes = 128 << 20

	DefaultTimeout = 10 * time.Minute
	MaxTimeout     = 24 * time.Hour
	DefaultRetries = 2
	MaxRetries     = 100
	MaxBatch       = 256 // batch.max

	// Bounds and defaults of spawn.max_depth and spawn.max_children.
	DefaultSpawnDepth    = 8
	MaxSpawnDepth        = 64
	DefaultSpawnChildren = 256
	MaxSpawnChildren     = 100_000

	// MaxReplicas bounds verify.replicas; verify.max_replicas may go up to
	// twice that.
	MaxReplicas = 100

	TrustOff      = "off"
	TrustAdaptive = "adaptive"
)

// Job is a parsed and validated job spec. All defaults are filled in.
type Job struct {
	File       string // path of the spec file as given to ParseFile or Parse ("" if none)
	Dir        string // absolute directory that relative paths are resolved against
	Name       string // job name: [A-Za-z0-9._-]{1,64}
	Plugin     string // plugin path as written in the spec
	PluginPath string // Plugin resolved against Dir; existence is not checked
	PluginPos  Pos    // position of the plugin value in the spec
	// PluginBuilds are the executables of a per-platform plugin map, by
	// platform (nil for a single plugin path); Plugin and PluginPath are
	// then this machine's entry, or empty if the map has none.
	PluginBuilds []PluginBuild
	Params       map[string]any // job-level params (never nil)
	Tasks        Tasks          // at least one, in spec order, expanded on demand
	Inputs       []Input        // in spec order
	Output       string         // absolute output directory
	Reduce       bool
	Timeout      time.Duration // per task attempt
	Retries      int           // extra attempts after a plugin failure
	Verify       Verify
	Resources    Resources
	Sandbox      Sandbox
	// Batch bounds how many tiny tasks a worker runs through one plugin
	// call (docs/spec.md, "batch"): 0 lets the coordinator size batches,
	// 1 is "batch: off", N is "batch: {max: N}". Not part of the job's
	// identity: it changes how tasks are run, not what they compute.
	Batch int
	// Stages, when given, replace Plugin, Tasks and Reduce: the job is a
	// graph of flat jobs (docs/spec.md, "stages"), in spec order; every
	// field above is their default. Plugin and Tasks are then empty.
	Stages []*Stage
	// OnFailure is what a failed task of a job with stages does to the
	// rest: OnFailureStop (the default) or OnFailureContinue.
	OnFailure string
	// Spawn, when not nil, lets the tasks of a job without stages spawn
	// children (sdk.Spawn): the job runs as a fork tree (docs/spec.md,
	// "spawn"). Not part of the job's identity.
	Spawn *Spawn
	order []int // StageOrder
}

// Spawn bounds a fork tree (docs/spec.md, "spawn").
type Spawn struct {
	// MaxDepth is the deepest a task may be: the spec's tasks are at
	// depth 0, their children at 1. A task at MaxDepth that spawns fails.
	MaxDepth int
	// MaxChildren bounds the children of one task, all its Waits
	// together.
	MaxChildren int
}

// Sandbox is what a job's tasks may do beyond the confinement every task
// runs in (docs/spec.md, "sandbox").
type Sandbox struct {
	// Network: the tasks need the network. Only peers started with
	// p2pc join --allow-network take such a job.
	Network bool
}

// Task is one unit of work after expansion of the generators (Tasks.At).
type Task struct {
	ID string
	// Params holds job params, overridden by the entry's params, overridden
	// by the generator's own value(s). Never nil. Values are string, bool,
	// int64, float64, nil, []any or map[string]any, and may be shared
	// between tasks: treat them as read-only.
	Params map[string]any
	Pos    Pos // position of the tasks entry that produced the task
}

// Pos is a 1-based position in the spec file.
type Pos struct{ Line, Col int }

// String returns "line:col".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Input is a file made available to every task under Name.
type Input struct {
	Name string // file name the task sees; unique, no path separators
	Path string // absolute; existence is not checked
	Pos  Pos
}

// Verify holds the redundancy settings the coordinator applies: how many
// peers run each task, how many matching results it accepts, how far it
// adds replicas when they disagree, adaptive trust and spot checks
// (docs/spec.md, "verify"). A plugin that implements sdk.Verifier has
// each output checked by the coordinator instead of by votes.
type Verify struct {
	Replicas    int    // copies of each task run on distinct peers (node IDs, hosts), >= 1
	Quorum      int    // matching results needed to accept, 1..Replicas
	MaxReplicas int    // cap on copies when results disagree, >= Replicas
	Trust       string // TrustOff or TrustAdaptive
	// SpotCheck is the fraction (0 to 1) of accepted results that the
	// submitter re-runs on its own slots, the one party it trusts; a
	// mismatch excludes the voters and re-verifies what they voted for.
	SpotCheck float64
	// DistinctHosts: a task's replicas run on peers at distinct network
	// addresses (hosts as the coordinator dials them), not only distinct
	// node IDs; false (a single-machine lab) relaxes it. Default true.
	DistinctHosts bool
}

// ParseFile reads and parses the spec at path. Relative paths in the spec
// are resolved against the directory that holds it.
//
// An invalid spec gives an ErrorList; a file that cannot be read gives an
// error wrapped with "read spec".
func ParseFile(path string) (*Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxSize {
		return nil, ErrorList{tooLarge(path, fi.Size())}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if len(data) > MaxSize {
		return nil, ErrorList{tooLarge(path, -1)}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return Parse(path, data, dir)
}

// tooLarge reports a spec over MaxSize; size < 0 means unknown.
func tooLarge(file string, size int64) *Error {
	msg := fmt.Sprintf("spec is larger than the limit of %d bytes", MaxSize)
	if size >= 0 {
		msg = fmt.Sprintf("spec is %d bytes, larger than the limit of %d bytes", size, MaxSize)
	}
	return &Error{File: file, Msg: msg}
}

// Parse parses and validates the spec in data. file names the spec in error
// messages and gives the default job name; dir is the directory relative
// paths are resolved against (made absolute; "" is the working directory).
//
// An invalid spec gives an ErrorList holding every problem found.
func Parse(file string, data []byte, dir string) (*Job, error) {
	return parseWith(file, data, dir, defaultLimits)
}

func parseWith(file string, data []byte, dir string, lim limits) (*Job, error) {
	if len(data) > MaxSize {
		return nil, ErrorList{tooLarge(file, int64(len(data)))}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("parse spec: resolve directory: %w", err)
	}
	p := &parser{errorSink: errorSink{file: file}, dir: abs, limits: lim}
	root := p.load(data)
	var job *Job
	if root != nil {
		job = p.job(root)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	if job == nil { // cannot happen: every path to nil reports an error
		return nil, ErrorList{{File: file, Line: 1, Col: 1, Msg: "internal error: no job and no error"}}
	}
	job.File = file
	for _, st := range job.Stages {
		st.Job.File = file
	}
	return job, nil
}
