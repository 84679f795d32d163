package sdk

import (
	"context"
	"encoding/json"
	"errors"
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

// Verifier is optionally implemented next to Task by plugins whose answers
// are hard to find and easy to check (the seed papers' NP-like problems).
// With it a single replica suffices: the coordinator checks each output
// and a rejected one counts as a lost vote for the peer that produced it.
// Verify returns nil to accept, an error saying why to reject.
type Verifier interface {
	Verify(ctx context.Context, req *VerifyRequest) error
}

// VerifyRequest is a task and the output to check.
type VerifyRequest struct {
	JobID  string
	TaskID string
	Params json.RawMessage
	Inputs []File
	// Output holds DataFile (if the task returned Data) and its files.
	Output []File
}

// Decode unmarshals the task parameters into v.
func (r *VerifyRequest) Decode(v any) error {
	if err := decodeParams(r.Params, v, false); err != nil {
		return fmt.Errorf("decode params of task %s: %w", r.TaskID, err)
	}
	return nil
}

// DecodeStrict is Decode that also rejects unknown and missing keys (see
// Request.DecodeStrict).
func (r *VerifyRequest) DecodeStrict(v any) error {
	if err := decodeParams(r.Params, v, true); err != nil {
		return fmt.Errorf("decode params of task %s: %w", r.TaskID, err)
	}
	return nil
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

	// Send queues a message (at most MaxMessageSize bytes) for the task
	// named to, wherever it runs. Messages from one sender arrive in the
	// order sent; a message to a task that is not running (yet, or any
	// more: its peer died) is held until it runs again.
	Send(ctx context.Context, to string, data []byte) error
	// Recv waits for the next message to this task, or ctx's end.
	Recv(ctx context.Context) (Message, error)

	// Load reads a job-global variable (Version 0: never stored).
	Load(ctx context.Context, key string) (Global, error)
	// Store sets a job-global variable (at most MaxGlobalSize bytes).
	Store(ctx context.Context, key string, value []byte) (Global, error)
	// CompareAndSwap sets key to value only if it is still at version;
	// either way it returns the variable as it now is. Job-global
	// variables are held by the job's coordinator: every operation is
	// linearizable. See Update for the usual read-modify-write loop.
	CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (swapped bool, current Global, err error)

	// Checkpoint saves the task's state (at most MaxCheckpointSize bytes).
	// If the task's peer dies, the task is started again elsewhere and
	// Resume returns the latest state saved: work since then is lost,
	// nothing before. Messages received before a checkpoint are not
	// delivered again after a resume; later ones are.
	Checkpoint(ctx context.Context, state []byte) error
	// Resume returns the latest checkpoint of this task (ok false if none).
	Resume(ctx context.Context) (state []byte, ok bool, err error)
}

// Limits of the Host calls.
const (
	MaxMessageSize    = 1 << 20
	MaxGlobalSize     = 64 << 10
	MaxCheckpointSize = 16 << 20
)

// Message is a message from another task of the job.
type Message struct {
	From string
	Data []byte
	// Seq numbers the messages to this task: 1, 2, ...
	Seq uint64
}

// Global is a job-global variable's value at a version. Version 0 means
// the variable was never stored.
type Global struct {
	Version uint64
	Value   []byte
}

// Update applies fn to the current value of a job-global variable and
// stores the result with CompareAndSwap, trying again when another task
// got there first. fn may be called several times and must not have
// side effects. It returns the value Update stored.
func Update(ctx context.Context, h Host, key string, fn func(cur []byte) ([]byte, error)) (Global, error) {
	cur, err := h.Load(ctx, key)
	if err != nil {
		return Global{}, err
	}
	for {
		next, err := fn(cur.Value)
		if err != nil {
			return Global{}, err
		}
		ok, now, err := h.CompareAndSwap(ctx, key, cur.Version, next)
		if err != nil {
			return Global{}, err
		}
		if ok {
			return now, nil
		}
		cur = now
	}
}

// ErrUnsupported: the host does not offer the call (an older p2pc, or a
// test host).
var ErrUnsupported = errors.New("not supported by this host")

// UnsupportedHost answers every optional Host call with ErrUnsupported.
// Hosts embed it so that Host can grow without breaking them.
type UnsupportedHost struct{}

func (UnsupportedHost) Send(context.Context, string, []byte) error { return ErrUnsupported }
func (UnsupportedHost) Recv(context.Context) (Message, error)      { return Message{}, ErrUnsupported }
func (UnsupportedHost) Load(context.Context, string) (Global, error) {
	return Global{}, ErrUnsupported
}
func (UnsupportedHost) Store(context.Context, string, []byte) (Global, error) {
	return Global{}, ErrUnsupported
}
func (UnsupportedHost) CompareAndSwap(context.Context, string, uint64, []byte) (bool, Global, error) {
	return false, Global{}, ErrUnsupported
}
func (UnsupportedHost) Checkpoint(context.Context, []byte) error { return ErrUnsupported }
func (UnsupportedHost) Resume(context.Context) ([]byte, bool, error) {
	return nil, false, ErrUnsupported
}

// Request is one task to run.
type Request struct {
	JobID   string
	TaskID  string
	Attempt int
	// Params is the task's parameters as a JSON object: the job's params
	// merged with the task's own.
	Params json.RawMessage
	// Inputs are the job's input files, read-only, and in a job with
	// stages the outputs of the upstream tasks the task needs, named
	// needs/<stage>/<task id>/<file> (Needs lists them).
	Inputs []File
	// WorkDir is private, empty and writable. Files written here and named
	// in Result.Files are the task's outputs.
	WorkDir string
}

// Decode unmarshals the task parameters into v (usually a pointer to a
// struct with json tags). Keys that v does not have are ignored, because
// job-level params are shared by every task; keys the params leave out
// keep v's values (set defaults before the call).
func (r *Request) Decode(v any) error {
	if err := decodeParams(r.Params, v, false); err != nil {
		return fmt.Errorf("decode params of task %s: %w", r.TaskID, err)
	}
	return nil
}

// DecodeStrict is Decode for a plugin that owns every parameter of its
// jobs: it rejects a key v has no field for (a typo in the spec, at any
// depth) and a field of the struct v points to that the params leave out,
// unless the field is tagged omitempty (or omitzero), which makes it
// optional. Keys match field names as in Decode (exact, else ignoring
// case).
func (r *Request) DecodeStrict(v any) error {
	if err := decodeParams(r.Params, v, true); err != nil {
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
	if err := decodeParams(r.Params, v, false); err != nil {
		return fmt.Errorf("decode job params: %w", err)
	}
	return nil
}

// DecodeStrict is Decode that also rejects unknown and missing keys (see
// Request.DecodeStrict).
func (r *ReduceRequest) DecodeStrict(v any) error {
	if err := decodeParams(r.Params, v, true); err != nil {
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

// File returns the output file named name; ReadFile and Data read one.
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
