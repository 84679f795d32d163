package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Job is an in-memory coordinator for the tasks of one job, for testing
// plugins whose tasks work together: the Hosts it hands out deliver
// messages between its tasks, share one set of job-global variables and
// keep each task's latest checkpoint. Everything stays in the process;
// nothing is persisted.
//
// It follows the contract of sdk.Host:
//
//   - Send queues a message for any task ID (the task need not be running
//     yet) without blocking; Recv returns the next one, in the order
//     sent per sender, with Seq 1, 2, ... per receiver.
//   - Load, Store and CompareAndSwap act on one map under one lock, so
//     they are linearizable. A variable never stored has Version 0; every
//     successful Store or swap adds one.
//   - Checkpoint keeps the task's latest state, which Resume returns.
//
// Each call of Host starts a new incarnation of the task, as when a
// coordinator starts a task again after its peer died, and the Host of
// the previous incarnation fails every later call but Progress and
// Partial with ErrSuperseded. As in p2pc's coordinator, the new
// incarnation starts from the beginning: its messages are delivered again
// from the first, and its shared-state operations (Send, Load, Store,
// CompareAndSwap) replay the task's op log: as long as it makes the same
// operation (kind and key) as the earlier incarnation did at that point,
// it gets the recorded result and nothing is applied again; an operation
// past the end of the log, or a different one (the task diverged: the
// rest of the log is dropped), is applied and recorded. A Resume that
// finds a checkpoint moves both positions to where they were at that
// checkpoint: messages received before it are not delivered again, and
// the replay goes on from the operations made after it. So a task that is
// deterministic given its Host results neither loses nor repeats an
// update across restarts.
//
// Like a remote host, every call fails once its context is done, and
// sizes over sdk.MaxMessageSize, sdk.MaxGlobalSize and
// sdk.MaxCheckpointSize are refused, as are keys that are empty, longer
// than 256 bytes or not UTF-8. Unlike p2pc's coordinator, a Job takes
// messages for any task ID, since it does not know the job's tasks in
// advance. A Job is safe for concurrent use.
type Job struct {
	// ID is the JobID that RunTasks gives requests that have none.
	ID string

	mu      sync.Mutex
	globals map[string]sdk.Global
	tasks   map[string]*taskState
}

// ErrSuperseded is what the Host of a task's earlier incarnation returns
// once Job.Host has started a newer one.
var ErrSuperseded = errors.New("sdktest: this task was started again: its host is superseded")

// taskState is what the job holds for one task ID.
type taskState struct {
	epoch int // incarnation, counted by Host

	msgs  []sdk.Message // every message sent to the task; Seq = index+1
	next  int           // index of the next message to deliver
	acked int           // next as of the latest checkpoint
	wake  chan struct{} // closed (and replaced) when a message arrives

	ops     []opRecord // the task's shared-state operations, in order
	pos     int        // the live incarnation's position in ops
	ckptPos int        // pos as of the latest checkpoint

	saved      bool
	checkpoint []byte
}

// opRecord is one shared-state operation of a task and its result.
type opRecord struct {
	op, key string
	swapped bool
	g       sdk.Global
	err     error
}

// NewJob returns an empty job with ID "sdktest".
func NewJob() *Job {
	return &Job{ID: "sdktest", globals: make(map[string]sdk.Global), tasks: make(map[string]*taskState)}
}

// task returns the state of task id, creating it. Call with j.mu held.
func (j *Job) task(id string) *taskState {
	ts, ok := j.tasks[id]
	if !ok {
		ts = &taskState{wake: make(chan struct{})}
		j.tasks[id] = ts
	}
	return ts
}

// Host starts a new incarnation of task taskID and returns its Host. It
// records the task's progress and partial results (RunTasks hands them
// over in the Outcome).
func (j *Job) Host(taskID string) sdk.Host {
	return j.host(taskID)
}

func (j *Job) host(taskID string) *jobHost {
	j.mu.Lock()
	defer j.mu.Unlock()
	ts := j.task(taskID)
	ts.epoch++
	ts.next, ts.pos = 0, 0
	return &jobHost{job: j, id: taskID, epoch: ts.epoch}
}

// do makes one shared-state operation of task ts through its op log:
// replayed if an earlier incarnation made it at this point, else applied
// and recorded. Call with j.mu held.
func (ts *taskState) do(op, key string, apply func() opRecord) opRecord {
	ts.pos = min(ts.pos, len(ts.ops)) // a resume past a log cut short
	if ts.pos < len(ts.ops) {
		if r := ts.ops[ts.pos]; r.op == op && r.key == key {
			ts.pos++
			return r
		}
		ts.ops = ts.ops[:ts.pos:ts.pos] // diverged: go on live
	}
	r := apply()
	r.op, r.key = op, key
	ts.ops = append(ts.ops, r)
	ts.pos++
	return r
}

func (r opRecord) global() sdk.Global {
	return sdk.Global{Version: r.g.Version, Value: bytes.Clone(r.g.Value)}
}

// Global returns the current value of a job-global variable (Version 0
// if it was never stored).
func (j *Job) Global(key string) sdk.Global {
	j.mu.Lock()
	defer j.mu.Unlock()
	g := j.globals[key]
	return sdk.Global{Version: g.Version, Value: bytes.Clone(g.Value)}
}

// Keys returns the names of every job-global variable ever stored, sorted.
func (j *Job) Keys() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	keys := make([]string, 0, len(j.globals))
	for k := range j.globals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Checkpoint returns the latest state task taskID checkpointed (ok false
// if it never did).
func (j *Job) Checkpoint(taskID string) (state []byte, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ts, found := j.tasks[taskID]
	if !found || !ts.saved {
		return nil, false
	}
	return bytes.Clone(ts.checkpoint), true
}

// RunTasks runs a task of the job for each request, all at once, each on
// a new incarnation's Host (see Host), and waits for all of them. It
// returns one Outcome per request, in order, even when some failed (each
// successful one owns temporary directories until its Cleanup).
//
// Requests are handled as RunRequest handles them, except that a request
// without a JobID gets the job's ID. Task IDs must be distinct and not
// empty. When a task fails, the contexts of the others are cancelled, as
// a coordinator gives up a job whose task failed, and RunTasks returns
// the first failure, wrapped with its task's ID.
func (j *Job) RunTasks(ctx context.Context, task sdk.Task, reqs []*sdk.Request) ([]*Outcome, error) {
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		switch {
		case r.TaskID == "":
			return nil, errors.New("sdktest: RunTasks: a request has no TaskID")
		case seen[r.TaskID]:
			return nil, fmt.Errorf("sdktest: RunTasks: task ID %q is given twice", r.TaskID)
		}
		seen[r.TaskID] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([]*Outcome, len(reqs))
	var (
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for i, r := range reqs {
		req := *r
		if req.JobID == "" {
			req.JobID = j.ID
		}
		h := j.host(req.TaskID)
		wg.Go(func() {
			out, err := runOn(ctx, task, &req, h)
			outs[i] = out
			if err != nil {
				once.Do(func() {
					firstErr = fmt.Errorf("task %s: %w", req.TaskID, err)
					cancel()
				})
			}
		})
	}
	wg.Wait()
	return outs, firstErr
}

// jobHost is the Host of one incarnation of a task of a Job. The embedded
// recorder keeps its progress and partial results.
type jobHost struct {
	recorder
	job   *Job
	id    string
	epoch int
}

var _ sdk.Host = (*jobHost)(nil)

// lock checks ctx and that h is the task's latest incarnation, and
// returns the task's state. On success j.mu is held: the caller unlocks.
func (h *jobHost) lock(ctx context.Context) (*taskState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.job.mu.Lock()
	ts := h.job.task(h.id)
	if ts.epoch != h.epoch {
		h.job.mu.Unlock()
		return nil, ErrSuperseded
	}
	return ts, nil
}

func (h *jobHost) Send(ctx context.Context, to string, data []byte) error {
	switch {
	case to == "":
		return errors.New("sdktest: send: no task named")
	case len(data) > sdk.MaxMessageSize:
		return fmt.Errorf("sdktest: send to %s: message of %d bytes over the %d limit", to, len(data), sdk.MaxMessageSize)
	}
	me, err := h.lock(ctx)
	if err != nil {
		return err
	}
	defer h.job.mu.Unlock()
	return me.do("send", to, func() opRecord {
		ts := h.job.task(to)
		ts.msgs = append(ts.msgs, sdk.Message{From: h.id, Data: bytes.Clone(data), Seq: uint64(len(ts.msgs) + 1)})
		close(ts.wake)
		ts.wake = make(chan struct{})
		return opRecord{}
	}).err
}

func (h *jobHost) Recv(ctx context.Context) (sdk.Message, error) {
	for {
		ts, err := h.lock(ctx)
		if err != nil {
			return sdk.Message{}, err
		}
		if ts.next < len(ts.msgs) {
			m := ts.msgs[ts.next]
			ts.next++
			h.job.mu.Unlock()
			m.Data = bytes.Clone(m.Data)
			return m, nil
		}
		wake := ts.wake
		h.job.mu.Unlock()
		select {
		case <-ctx.Done():
			return sdk.Message{}, ctx.Err()
		case <-wake:
		}
	}
}

func (h *jobHost) Load(ctx context.Context, key string) (sdk.Global, error) {
	if err := checkGlobal(key, nil); err != nil {
		return sdk.Global{}, fmt.Errorf("sdktest: load: %w", err)
	}
	ts, err := h.lock(ctx)
	if err != nil {
		return sdk.Global{}, err
	}
	defer h.job.mu.Unlock()
	r := ts.do("load", key, func() opRecord { return opRecord{g: h.job.globals[key]} })
	return r.global(), nil
}

func (h *jobHost) Store(ctx context.Context, key string, value []byte) (sdk.Global, error) {
	if err := checkGlobal(key, value); err != nil {
		return sdk.Global{}, fmt.Errorf("sdktest: store: %w", err)
	}
	ts, err := h.lock(ctx)
	if err != nil {
		return sdk.Global{}, err
	}
	j := h.job
	defer j.mu.Unlock()
	r := ts.do("store", key, func() opRecord {
		g := sdk.Global{Version: j.globals[key].Version + 1, Value: bytes.Clone(value)}
		j.globals[key] = g
		return opRecord{swapped: true, g: g}
	})
	return r.global(), nil
}

func (h *jobHost) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	if err := checkGlobal(key, value); err != nil {
		return false, sdk.Global{}, fmt.Errorf("sdktest: compare-and-swap: %w", err)
	}
	ts, err := h.lock(ctx)
	if err != nil {
		return false, sdk.Global{}, err
	}
	j := h.job
	defer j.mu.Unlock()
	r := ts.do("cas", key, func() opRecord {
		cur := j.globals[key]
		if cur.Version != version {
			return opRecord{g: cur}
		}
		cur = sdk.Global{Version: cur.Version + 1, Value: bytes.Clone(value)}
		j.globals[key] = cur
		return opRecord{swapped: true, g: cur}
	})
	return r.swapped, r.global(), nil
}

// maxKeyLen is the longest key p2pc's coordinator accepts.
const maxKeyLen = 256

func checkGlobal(key string, value []byte) error {
	switch {
	case key == "" || len(key) > maxKeyLen || !utf8.ValidString(key):
		return fmt.Errorf("key %q: want 1 to %d bytes of UTF-8", key, maxKeyLen)
	case len(value) > sdk.MaxGlobalSize:
		return fmt.Errorf("%s: value of %d bytes over the %d limit", key, len(value), sdk.MaxGlobalSize)
	}
	return nil
}

func (h *jobHost) Checkpoint(ctx context.Context, state []byte) error {
	if len(state) > sdk.MaxCheckpointSize {
		return fmt.Errorf("sdktest: checkpoint: %d bytes over the %d limit", len(state), sdk.MaxCheckpointSize)
	}
	ts, err := h.lock(ctx)
	if err != nil {
		return err
	}
	defer h.job.mu.Unlock()
	ts.saved, ts.checkpoint, ts.acked, ts.ckptPos = true, bytes.Clone(state), ts.next, ts.pos
	return nil
}

func (h *jobHost) Resume(ctx context.Context) ([]byte, bool, error) {
	ts, err := h.lock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer h.job.mu.Unlock()
	if !ts.saved {
		return nil, false, nil
	}
	ts.next, ts.pos = ts.acked, ts.ckptPos
	return bytes.Clone(ts.checkpoint), true, nil
}
