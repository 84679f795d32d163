package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// ErrSuspended is what Wait returns when the children it waits for are not
// done yet: the task must return it (or any error) at once. The call ends
// as "suspended" and holds no slot while its children run; when they are
// all done, Run is called again, from the start, and Spawn and Wait replay:
// the same Spawn calls get the same children's results.
var ErrSuspended = errors.New("suspended until its children are done")

// ErrNoSpawn: the job does not let its tasks spawn children (its spec has
// no spawn: section), or the host runs the task outside a job.
var ErrNoSpawn = errors.New("this job's tasks may not spawn children (the spec has no spawn: section)")

// Future is a child task's result to come (Spawn).
type Future struct {
	call *forkCall
	n    int // spawn index
}

// Child is a child task's accepted result.
type Child struct {
	TaskID string
	// Data is the child's inline result (Result.Data).
	Data []byte
	// Files are the child's output files (Result.Files), by name.
	Files []File
}

// Decode unmarshals the child's Data as JSON into v.
func (c *Child) Decode(v any) error {
	if err := json.Unmarshal(c.Data, v); err != nil {
		return fmt.Errorf("decode result of child %s: %w", c.TaskID, err)
	}
	return nil
}

// Spawn submits a child task to the job: it runs the job's plugin with
// params (a struct or map, marshalled to a JSON object and merged over the
// job's params), on any peer, as a task with ID <parent ID>.<n> (n: the
// spawn index, from 0). ctx must be the ctx Run was called with. Nothing
// runs until Wait: a task that returns without waiting for a child drops
// it. A parent must spawn the same children in the same order each time
// it is run (it is run again from the start after a Wait).
func Spawn(ctx context.Context, params any) Future {
	c, _ := ctx.Value(forkKey{}).(*forkCall)
	if c == nil {
		return Future{}
	}
	return c.spawn(params)
}

// Wait returns nil once every future's child is done (their results are
// then in Future.Result). Until then it returns ErrSuspended, which the
// task returns: the task is suspended, its children run, and the task is
// run again. A child that fails fails its parent (the children's errors
// are in the parent's). With a job that does not let tasks spawn, or
// params Spawn could not take, Wait returns that error.
func Wait(ctx context.Context, futures ...Future) error {
	c, _ := ctx.Value(forkKey{}).(*forkCall)
	if c == nil {
		return fmt.Errorf("wait: %w", ErrNoSpawn)
	}
	return c.wait(futures)
}

// ID is the child's task ID ("" for a Future of no job).
func (f Future) ID() string {
	if f.call == nil {
		return ""
	}
	return f.call.childID(f.n)
}

// Result is the child's result once Wait returned nil for it.
func (f Future) Result() (*Child, error) {
	if f.call == nil {
		return nil, fmt.Errorf("result: %w", ErrNoSpawn)
	}
	return f.call.result(f.n)
}

type forkKey struct{}

// forkCall is the fork side of one Run call.
type forkCall struct {
	state  *pluginpb.ForkState // nil: the job's tasks may not spawn
	inputs []File              // the call's spawn/... inputs

	mu        sync.Mutex
	spawned   []json.RawMessage // this call's Spawn params, in order
	err       error             // the first Spawn error
	suspended bool
	ckpt      []byte
	hasCkpt   bool
}

// startFork reads a task's fork state from its inputs (if the job spawns)
// and takes the spawn/... inputs out of r.Inputs.
func startFork(r *Request) (*forkCall, error) {
	c := &forkCall{}
	kept := r.Inputs[:0:0]
	for _, f := range r.Inputs {
		if strings.HasPrefix(f.Name, pluginpb.ForkStatePrefix) {
			b, err := os.ReadFile(f.Path)
			if err != nil {
				return nil, fmt.Errorf("read fork state: %w", err)
			}
			c.state = &pluginpb.ForkState{}
			if err := json.Unmarshal(b, c.state); err != nil {
				return nil, fmt.Errorf("read fork state %s: %w", f.Path, err)
			}
			continue
		}
		if strings.HasPrefix(f.Name, pluginpb.ForkDir+"/") {
			c.inputs = append(c.inputs, f)
			continue
		}
		kept = append(kept, f)
	}
	if c.state == nil && len(c.inputs) == 0 {
		return c, nil
	}
	r.Inputs = kept
	if c.state != nil && c.state.HasCheckpoint {
		c.ckpt, c.hasCkpt = c.state.Checkpoint, true
	}
	return c, nil
}

func (c *forkCall) childID(n int) string {
	if c.state == nil {
		return ""
	}
	return c.state.Task + "." + strconv.Itoa(n)
}

func (c *forkCall) spawn(params any) Future {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.spawned)
	b, err := json.Marshal(params)
	if err == nil && (len(b) == 0 || b[0] != '{') {
		err = errors.New("params must be a JSON object (a struct or a map)")
	}
	if err != nil {
		b = []byte("{}")
		if c.err == nil {
			c.err = fmt.Errorf("spawn child %d: %w", n, err)
		}
	}
	if c.state != nil && n < len(c.state.Children) {
		if old := c.state.Children[n].Params; !bytes.Equal(old, b) && c.err == nil {
			c.err = fmt.Errorf("spawn child %d: params %s differ from %s, the params of the first call (a parent must spawn the same children each time it runs)", n, b, old)
		}
	}
	c.spawned = append(c.spawned, b)
	return Future{call: c, n: n}
}

func (c *forkCall) wait(futures []Future) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return fmt.Errorf("wait: %w", c.err)
	}
	if c.state == nil {
		return fmt.Errorf("wait: %w", ErrNoSpawn)
	}
	for _, f := range futures {
		if f.call != c {
			return errors.New("wait: a future of another task or call")
		}
		if f.n >= len(c.state.Children) {
			c.suspended = true
			return ErrSuspended
		}
	}
	return nil
}

func (c *forkCall) result(n int) (*Child, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil || n >= len(c.state.Children) {
		return nil, fmt.Errorf("result of child %d: not done (Wait for it first)", n)
	}
	ch := &Child{TaskID: c.state.Children[n].ID}
	prefix := pluginpb.ForkOutPrefix + ch.TaskID + "/"
	for _, f := range c.inputs {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok {
			continue
		}
		if name == DataFile {
			b, err := os.ReadFile(f.Path)
			if err != nil {
				return nil, fmt.Errorf("result of child %s: %w", ch.TaskID, err)
			}
			ch.Data = b
			continue
		}
		ch.Files = append(ch.Files, File{Name: name, Path: f.Path})
	}
	return ch, nil
}

// finish turns a suspended call's outcome into its suspension.
func (c *forkCall) finish(res *Result, err error) (*Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.suspended {
		return res, err
	}
	s := &pluginpb.Suspension{Children: c.spawned[len(c.state.Children):], Checkpoint: c.ckpt, HasCheckpoint: c.hasCkpt}
	data, encErr := pluginpb.EncodeSuspension(s)
	if encErr != nil {
		return nil, encErr
	}
	return &Result{Data: data}, nil
}

// forkHost keeps a fork task's checkpoints for its suspension, and gives
// a resumed task the one it was suspended with.
type forkHost struct {
	Host
	c *forkCall
}

func (h forkHost) Checkpoint(ctx context.Context, state []byte) error {
	if len(state) > MaxCheckpointSize {
		return fmt.Errorf("checkpoint: %d bytes over the %d limit", len(state), MaxCheckpointSize)
	}
	h.c.mu.Lock()
	h.c.ckpt, h.c.hasCkpt = bytes.Clone(state), true
	h.c.mu.Unlock()
	if err := h.Host.Checkpoint(ctx, state); err != nil && !errors.Is(err, ErrUnsupported) {
		return err
	}
	return nil
}

func (h forkHost) Resume(ctx context.Context) ([]byte, bool, error) {
	h.c.mu.Lock()
	ckpt, ok := h.c.ckpt, h.c.hasCkpt
	h.c.mu.Unlock()
	if ok {
		return bytes.Clone(ckpt), true, nil
	}
	return h.Host.Resume(ctx)
}

// runTask runs t for one call: with the call's fork state in ctx, and a
// suspension as its result when Wait suspended it.
func runTask(ctx context.Context, t Task, r *Request, host Host) (*Result, error) {
	c, err := startFork(r)
	if err != nil {
		return nil, err
	}
	if c.state != nil {
		host = forkHost{Host: host, c: c}
	}
	ctx = context.WithValue(ctx, forkKey{}, c)
	res, err := safeCall(func() (*Result, error) { return t.Run(ctx, r, host) })
	return c.finish(res, err)
}

// suspended says whether a task's output is a suspension: its only file
// is DataFile, holding one.
func suspended(output []File) bool {
	if len(output) != 1 || output[0].Name != DataFile {
		return false
	}
	f, err := os.Open(output[0].Path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(pluginpb.SuspendMagic))
	n, _ := io.ReadFull(f, head)
	return string(head[:n]) == pluginpb.SuspendMagic
}
