package sdk

import (
	"context"
	"encoding/json"
	"fmt"
)

// Task is what a plugin author implements: run one task of a job.
//
// Run must be deterministic for given params and inputs if the job asks for
// redundant execution. It should honour ctx; a task that overruns its
// timeout has its whole plugin process killed by the host.
type Task interface {
	Run(ctx context.Context, req *Request, host Host) (*Result, error)
}

// Reducer is optionally implemented next to Task: it assembles all task
// outputs of a job into the job's final artifact (a spec asks for it with
// `reduce: true`).
type Reducer interface {
	Reduce(ctx context.Context, req *ReduceRequest, host Host) (*Result, error)
}

// Describer is optionally implemented to name the plugin.
type Describer interface {
	Describe() Info
}

// Info describes a plugin.
type Info struct {
	Name    string
	Version string
	// Portable declares that outputs do not depend on the CPU architecture,
	// so redundant replicas may run on peers of any GOARCH.
	Portable bool
}

// Host is the node running the task, as seen by the task. Authors call
// it; they never implement it (so methods may be added without breaking
// plugins). Calls are cheap but cross a process boundary: report progress
// at most a few times a second.
type Host interface {
	// Progress reports how far the task is, fraction in [0, 1].
	Progress(ctx context.Context, fraction float64, note string) error
	// Partial emits a partial result while the task runs; the submitter
	// sees it live and the run report keeps it.
	Partial(ctx context.Context, data []byte) error
}

// Request is one task to run.
type Request struct {
	JobID   string
	TaskID  string
	Attempt int
	// Params is the task's parameters as a JSON object: the job's params
	// merged with the task's own.
	Params json.RawMessage
	// Inputs are the job's input files, read-only.
	Inputs []File
	// WorkDir is private, empty and writable. Files written here and named
	// in Result.Files are the task's outputs.
	WorkDir string
}

// Decode unmarshals the task parameters into v (usually a pointer to a
// struct with json tags). Keys that v does not have are ignored, because
// job-level params are shared by every task.
func (r *Request) Decode(v any) error {
	if len(r.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return fmt.Errorf("decode params of task %s: %w", r.TaskID, err)
	}
	return nil
}

// Input returns the input named name.
func (r *Request) Input(name string) (File, bool) {
	for _, f := range r.Inputs {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}

// File is a named local file.
type File struct {
	Name string
	Path string
}

// Result is a task's output: inline data, files in the work dir, or both.
type Result struct {
	// Data is a small output returned inline (it is stored as the file
	// "data" of the task's output). Keep it under a few MiB; write bigger
	// outputs as files.
	Data []byte
	// Files are output file paths relative to WorkDir.
	Files []string
}

// DataFile is the name under which a Result's inline Data is stored.
const DataFile = "data"

// ReduceRequest hands a reducer every accepted task output, in spec order.
type ReduceRequest struct {
	JobID string
	// Params is the job-level params as a JSON object.
	Params  json.RawMessage
	Tasks   []TaskOutput
	WorkDir string
}

// Decode unmarshals the job-level parameters into v.
func (r *ReduceRequest) Decode(v any) error {
	if len(r.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return fmt.Errorf("decode job params: %w", err)
	}
	return nil
}

// TaskOutput is one task's accepted output, as local files.
type TaskOutput struct {
	TaskID string
	Params json.RawMessage
	// Files holds DataFile (if the task returned Data) and the task's files.
	Files []File
}

// File returns the output file named name.
func (t *TaskOutput) File(name string) (File, bool) {
	for _, f := range t.Files {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}

// TaskError is how a task's own failure reaches the host: it counts
// against the task's retries. Any other error from a plugin client means
// the plugin process or its connection failed.
type TaskError struct {
	TaskID string
	Msg    string
}

func (e *TaskError) Error() string {
	if e.TaskID == "" {
		return "task failed: " + e.Msg
	}
	return fmt.Sprintf("task %s failed: %s", e.TaskID, e.Msg)
}
