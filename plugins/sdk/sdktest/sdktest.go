package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Outcome is what one in-process Run or Reduce produced.
type Outcome struct {
	// Result is what the task returned; nil if it failed.
	Result *sdk.Result
	// WorkDir is the work dir the call ran in. It is kept until Cleanup,
	// so that outputs can be inspected or handed on to a reducer.
	WorkDir string
	// Progress holds every fraction the task reported, in call order, and
	// Notes the notes that came with them.
	Progress []float64
	Notes    []string
	// Partials holds every partial result the task emitted, in call order.
	Partials [][]byte
	// Files is every output read back into memory: the Result's Data under
	// sdk.DataFile (if not empty) and each file of Result.Files under its
	// cleaned, slash-separated path. Nil if the task failed.
	Files map[string][]byte

	params json.RawMessage
	root   string // temporary directory owned by the Outcome, or ""
}

// Cleanup removes the temporary directories Run or Reduce created. The
// Outcome's Files stay valid; its WorkDir and Output paths do not.
func (o *Outcome) Cleanup() error {
	if o == nil || o.root == "" {
		return nil
	}
	err := os.RemoveAll(o.root)
	o.root = ""
	return err
}

// Output returns the task's output the way a host hands it to a reducer:
// files named sdk.DataFile (if Data was not empty) and the task's output
// files, as local paths that stay valid until Cleanup.
func (o *Outcome) Output(taskID string) sdk.TaskOutput {
	out := sdk.TaskOutput{TaskID: taskID, Params: o.params}
	if o.Result == nil {
		return out
	}
	if len(o.Result.Data) > 0 {
		out.Files = append(out.Files, sdk.File{Name: sdk.DataFile, Path: filepath.Join(o.root, "inline", sdk.DataFile)})
	}
	for _, f := range o.Result.Files {
		out.Files = append(out.Files, sdk.File{Name: filepath.ToSlash(filepath.Clean(f)), Path: filepath.Join(o.WorkDir, f)})
	}
	return out
}

// Run runs one task in-process: params (marshalled to a JSON object; nil
// means {}) and inputs become an sdk.Request with JobID "sdktest", TaskID
// "task" and Attempt 0, run in a fresh temporary work dir.
//
// A task's error, or a panic, comes back as the error, together with an
// Outcome holding the callbacks recorded up to then; the temporary work
// dir is removed in that case (and the Outcome's WorkDir is empty). On success the caller owns the Outcome's
// temporary directories and removes them with Cleanup.
func Run(ctx context.Context, t sdk.Task, params any, inputs ...sdk.File) (*Outcome, error) {
	raw, err := Params(params)
	if err != nil {
		return nil, err
	}
	return RunRequest(ctx, t, &sdk.Request{JobID: "sdktest", TaskID: "task", Params: raw, Inputs: inputs})
}

// RunRequest is Run with a request the caller builds, for tests that need
// a particular TaskID, Attempt or work dir. If req.WorkDir is empty a
// temporary one is made (and removed on failure); a given WorkDir is
// used as is and never removed.
func RunRequest(ctx context.Context, t sdk.Task, req *sdk.Request) (*Outcome, error) {
	return runOn(ctx, t, req, &recorder{})
}

// outcomeHost is a Host that records what a task told it into an
// Outcome (recorder, and jobHost which embeds one).
type outcomeHost interface {
	sdk.Host
	fill(*Outcome)
}

// runOn is RunRequest with host h.
func runOn(ctx context.Context, t sdk.Task, req *sdk.Request, h outcomeHost) (*Outcome, error) {
	root, err := os.MkdirTemp("", "sdktest-")
	if err != nil {
		return nil, fmt.Errorf("sdktest: make temp dir: %w", err)
	}
	r := *req
	if r.WorkDir == "" {
		r.WorkDir = filepath.Join(root, "work")
		if err := os.Mkdir(r.WorkDir, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, fmt.Errorf("sdktest: make work dir: %w", err)
		}
	}
	out := &Outcome{WorkDir: r.WorkDir, params: r.Params, root: root}
	res, err := call(func() (*sdk.Result, error) { return t.Run(ctx, &r, h) })
	h.fill(out)
	if err == nil {
		err = out.collect(res)
	}
	if err != nil {
		if req.WorkDir == "" {
			out.WorkDir = ""
		}
		out.Cleanup()
		return out, err
	}
	return out, nil
}

// Reduce runs r's Reduce in-process over outputs (usually built with
// Outcome.Output), with jobParams marshalled like Run's params and a
// fresh temporary work dir. Errors and cleanup are as for Run.
func Reduce(ctx context.Context, r sdk.Reducer, jobParams any, outputs []sdk.TaskOutput) (*Outcome, error) {
	raw, err := Params(jobParams)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "sdktest-")
	if err != nil {
		return nil, fmt.Errorf("sdktest: make temp dir: %w", err)
	}
	req := &sdk.ReduceRequest{JobID: "sdktest", Params: raw, Tasks: outputs, WorkDir: filepath.Join(root, "work")}
	if err := os.Mkdir(req.WorkDir, 0o700); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("sdktest: make work dir: %w", err)
	}
	out := &Outcome{WorkDir: req.WorkDir, params: raw, root: root}
	h := &recorder{}
	res, err := call(func() (*sdk.Result, error) { return r.Reduce(ctx, req, h) })
	h.fill(out)
	if err == nil {
		err = out.collect(res)
	}
	if err != nil {
		out.WorkDir = ""
		out.Cleanup()
		return out, err
	}
	return out, nil
}

// Verify runs v's Verify in-process on the output of out, a successful
// Run, with the params out ran with and the given inputs, the way the
// coordinator checks an output: nil means accepted. A panic in Verify
// comes back as an error.
func Verify(ctx context.Context, v sdk.Verifier, out *Outcome, inputs ...sdk.File) (err error) {
	o := out.Output("task")
	req := &sdk.VerifyRequest{JobID: "sdktest", TaskID: "task", Params: out.params, Inputs: inputs, Output: o.Files}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return v.Verify(ctx, req)
}

// Params turns v into the JSON object a task receives as its params:
// nil gives {}, a json.RawMessage or []byte is used verbatim (it must be
// valid JSON), anything else is marshalled with encoding/json. The result
// must be a JSON object.
func Params(v any) (json.RawMessage, error) {
	var raw []byte
	switch p := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		raw = bytes.Clone(p)
	case []byte:
		raw = bytes.Clone(p)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("sdktest: marshal params: %w", err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("sdktest: params are not valid JSON: %q", raw)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("sdktest: params must be a JSON object, got %q", raw)
	}
	return raw, nil
}

// call runs f and turns a panic into an error, as the SDK's plugin side
// does.
func call(f func() (*sdk.Result, error)) (res *sdk.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

// collect checks res's output files the way the host does (local paths
// naming regular files, not symlinks, reached without leaving the work
// dir; no name twice) and reads them and the inline data back. It also
// keeps Data as a file, for Output.
func (o *Outcome) collect(res *sdk.Result) error {
	if res == nil {
		res = &sdk.Result{}
	}
	files := make(map[string][]byte)
	if len(res.Data) > 0 {
		files[sdk.DataFile] = bytes.Clone(res.Data)
		dir := filepath.Join(o.root, "inline")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("sdktest: keep inline data: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, sdk.DataFile), res.Data, 0o600); err != nil {
			return fmt.Errorf("sdktest: keep inline data: %w", err)
		}
	}
	root, err := os.OpenRoot(o.WorkDir)
	if err != nil {
		return fmt.Errorf("sdktest: open work dir: %w", err)
	}
	defer root.Close()
	for _, f := range res.Files {
		name := filepath.ToSlash(filepath.Clean(f))
		if !filepath.IsLocal(f) {
			return fmt.Errorf("output file %q is not a local path inside the work dir", f)
		}
		if _, dup := files[name]; dup {
			if name == sdk.DataFile {
				return fmt.Errorf("output file %q collides with the inline Data, which is stored under that name", f)
			}
			return fmt.Errorf("output file %q is listed twice", f)
		}
		b, err := readRegular(root, filepath.Clean(f))
		if err != nil {
			return fmt.Errorf("output file %q: %w", f, err)
		}
		files[name] = b
	}
	o.Result, o.Files = res, files
	return nil
}

// readRegular reads the regular file name in root. A symlink is refused
// even if it points inside: the host does not follow them either.
func readRegular(root *os.Root, name string) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, errors.New("is a directory, not a regular file")
	case fi.Mode()&os.ModeSymlink != 0:
		return nil, errors.New("is a symlink, not a regular file")
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("is not a regular file (mode %v)", fi.Mode())
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// recorder is the Host a task sees under sdktest: it records every
// callback. Like a remote host, it fails calls whose context is done.
type recorder struct {
	sdk.UnsupportedHost
	mu       sync.Mutex
	progress []float64
	notes    []string
	partials [][]byte
}

func (h *recorder) Progress(ctx context.Context, fraction float64, note string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.progress = append(h.progress, fraction)
	h.notes = append(h.notes, note)
	return nil
}

func (h *recorder) Partial(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.partials = append(h.partials, bytes.Clone(data))
	return nil
}

func (h *recorder) fill(o *Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.Progress, o.Notes, o.Partials = h.progress, h.notes, h.partials
}
