package vc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Limits of the shared state.
const (
	MaxGlobals = 10000
	MaxKeyLen  = 256
	MaxQueued  = 10000 // messages waiting for one task
	// MaxOpLog bounds a task's op log; beyond it operations are applied
	// without being recorded (and would be applied again by a resumed task).
	MaxOpLog = 1 << 20
)

// ErrRevoked: the attempt's lease was taken back while it waited.
var ErrRevoked = errors.New("lease revoked")

// State is the shared state of a job's tasks.
type State struct {
	mu      sync.Mutex
	ids     func() []string // valid task IDs (isTaskLocked)
	tasks   map[string]bool // ids as a set, made at the first message
	globals map[string]sdk.Global
	mail    map[string]*mailbox
	ckpt    map[string]checkpoint
	ops     map[string][]opRecord
	store   func(ctx context.Context, data []byte) (string, error)
	log     *slog.Logger
	journal Journal // nil: nothing is kept
}

// Cursor is one attempt's position in its task's shared state: the
// messages it has received, its place in the task's op log, and whether it
// resumed from a checkpoint. It is guarded by the State it is used with.
type Cursor struct {
	task     string
	revoked  <-chan struct{}
	consumed uint64
	pos      int
	resumed  atomic.Bool
}

// NewCursor starts an attempt of task at the beginning of its log;
// revoked is closed when the attempt is taken back (waits end then).
func NewCursor(task string, revoked <-chan struct{}) *Cursor {
	return &Cursor{task: task, revoked: revoked}
}

// Resumed reports whether the attempt resumed from a checkpoint.
func (c *Cursor) Resumed() bool { return c.resumed.Load() }

type mailbox struct {
	msgs   []sdk.Message // seq 1..n
	notify chan struct{} // closed and replaced on arrival
}

type checkpoint struct {
	state []byte
	seq   uint64 // messages consumed when it was taken
	pos   int    // length of the task's op log when it was taken
	at    time.Time
	block string // where the store keeps it ("" if nowhere)
}

// opRecord is one shared-state operation a task made, with its result.
//
// Every task has a log of them from its start. An attempt replays the log
// from its starting point (the beginning, or its checkpoint's position):
// while it repeats what an earlier attempt (or a concurrent replica) did,
// it gets the recorded results and nothing is applied again; past the end
// of the log its operations are applied and appended. So an update that
// raced with a peer's death is applied exactly once, and a resumed task
// sees the same results as the attempt it replaces, as long as the task
// is deterministic given its Host call results. An attempt that asks for
// something else than the log holds has diverged: the rest of the log is
// dropped (its effects stay) and the attempt goes on live.
type opRecord struct {
	op, key string
	ok      bool
	g       sdk.Global
	err     string
}

// New returns the empty shared state of a job with the given task IDs
// (messages can be sent to these only). store, if not nil, keeps each
// checkpoint durably (as blocks) before it counts and names where (a
// block ID); log may be nil.
func New(taskIDs []string, store func(ctx context.Context, data []byte) (string, error), log *slog.Logger) *State {
	return NewLazy(func() []string { return taskIDs }, store, log)
}

// NewLazy is New with the task IDs listed by taskIDs, called at the
// first message only: most jobs send none, and a job of a million tasks
// then holds no list of their IDs.
func NewLazy(taskIDs func() []string, store func(ctx context.Context, data []byte) (string, error), log *slog.Logger) *State {
	if log == nil {
		log = slog.Default()
	}
	v := &State{
		ids:     taskIDs,
		globals: map[string]sdk.Global{},
		mail:    map[string]*mailbox{},
		ckpt:    map[string]checkpoint{},
		ops:     map[string][]opRecord{},
		store:   store,
		log:     log,
	}
	return v
}

func (v *State) box(id string) *mailbox {
	b := v.mail[id]
	if b == nil {
		b = &mailbox{notify: make(chan struct{})}
		v.mail[id] = b
	}
	return b
}

// do runs one shared-state operation of c through the task's op log:
// replayed if an earlier attempt already made it, else applied (under the
// lock) and recorded.
func (v *State) do(c *Cursor, op, key string, apply func() opRecord) opRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	log := v.ops[c.task]
	if c.pos < len(log) {
		if r := log[c.pos]; r.op == op && r.key == key {
			c.pos++
			return r
		}
		v.log.Warn("task diverged from its earlier attempt; replay stops", "task", c.task, "at", c.pos, "want", log[c.pos].op+" "+log[c.pos].key, "got", op+" "+key)
		v.ops[c.task] = log[:c.pos:c.pos]
		if v.journal != nil {
			v.journal.TruncateOps(c.task, c.pos)
		}
	}
	r := apply()
	r.op, r.key = op, key
	if n := len(v.ops[c.task]); n < MaxOpLog {
		v.ops[c.task] = append(v.ops[c.task], r)
		c.pos++
		if v.journal != nil {
			v.journal.Op(c.task, n, r.export())
		}
	}
	return r
}

func (r opRecord) error() error {
	if r.err == "" {
		return nil
	}
	return errors.New(r.err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Send queues data for task to (Host.Send).
func (v *State) Send(c *Cursor, to string, data []byte) error {
	if len(data) > sdk.MaxMessageSize {
		return fmt.Errorf("send to %s: message of %d bytes over the %d limit", to, len(data), sdk.MaxMessageSize)
	}
	return v.do(c, "send", to, func() opRecord {
		return opRecord{err: errString(v.deliverLocked(c.task, to, data))}
	}).error()
}

// isTaskLocked reports whether id is one of the job's tasks. The set is
// made at the first question: most jobs send no message, and a map of
// every task ID costs a million-task job's worth of memory.
func (v *State) isTaskLocked(id string) bool {
	if v.tasks == nil {
		ids := v.ids()
		v.tasks = make(map[string]bool, len(ids))
		for _, id := range ids {
			v.tasks[id] = true
		}
	}
	return v.tasks[id]
}

// deliverLocked appends a message to the recipient's mailbox.
func (v *State) deliverLocked(from, to string, data []byte) error {
	if !v.isTaskLocked(to) {
		return fmt.Errorf("send to %s: no such task in this job", to)
	}
	b := v.box(to)
	if len(b.msgs) >= MaxQueued {
		return fmt.Errorf("send to %s: %d messages already queued", to, MaxQueued)
	}
	m := sdk.Message{From: from, Data: append([]byte(nil), data...), Seq: uint64(len(b.msgs) + 1)}
	b.msgs = append(b.msgs, m)
	if v.journal != nil {
		v.journal.Message(to, m)
	}
	close(b.notify)
	b.notify = make(chan struct{})
	return nil
}

// Recv waits for the message after c's last one (Host.Recv). It ends with
// ctx's error, or ErrRevoked when c's lease is taken back.
func (v *State) Recv(ctx context.Context, c *Cursor) (sdk.Message, error) {
	for {
		v.mu.Lock()
		b := v.box(c.task)
		if int(c.consumed) < len(b.msgs) {
			m := b.msgs[c.consumed]
			c.consumed++
			v.mu.Unlock()
			return m, nil
		}
		notify := b.notify
		v.mu.Unlock()
		select {
		case <-ctx.Done():
			return sdk.Message{}, ctx.Err()
		case <-c.revoked:
			return sdk.Message{}, ErrRevoked
		case <-notify:
		}
	}
}

// Load returns a global (Host.Load): version 0 and no value if unset.
func (v *State) Load(c *Cursor, key string) (sdk.Global, error) {
	if err := checkKey(key); err != nil {
		return sdk.Global{}, err
	}
	r := v.do(c, "load", key, func() opRecord { return opRecord{g: v.globals[key]} })
	return r.g, r.error()
}

// Store sets a global whatever its version (Host.Store).
func (v *State) Store(c *Cursor, key string, value []byte) (sdk.Global, error) {
	_, g, err := v.cas(c, key, 0, value, true)
	return g, err
}

// CompareAndSwap sets key to value if it is at version
// (Host.CompareAndSwap); it returns the global as it is afterwards.
func (v *State) CompareAndSwap(c *Cursor, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	return v.cas(c, key, version, value, false)
}

// cas sets key to value if it is at version (or always, with force).
func (v *State) cas(c *Cursor, key string, version uint64, value []byte, force bool) (bool, sdk.Global, error) {
	if err := checkKey(key); err != nil {
		return false, sdk.Global{}, err
	}
	if len(value) > sdk.MaxGlobalSize {
		return false, sdk.Global{}, fmt.Errorf("global %s: value of %d bytes over the %d limit", key, len(value), sdk.MaxGlobalSize)
	}
	op := "cas"
	if force {
		op = "store"
	}
	r := v.do(c, op, key, func() opRecord {
		ok, g, err := v.casLocked(key, version, value, force)
		return opRecord{ok: ok, g: g, err: errString(err)}
	})
	return r.ok, r.g, r.error()
}

func (v *State) casLocked(key string, version uint64, value []byte, force bool) (bool, sdk.Global, error) {
	cur, exists := v.globals[key]
	if !force && cur.Version != version {
		return false, cur, nil
	}
	if !exists && len(v.globals) >= MaxGlobals {
		return false, cur, fmt.Errorf("global %s: the job already has %d variables", key, MaxGlobals)
	}
	next := sdk.Global{Version: cur.Version + 1, Value: append([]byte(nil), value...)}
	v.globals[key] = next
	if v.journal != nil {
		v.journal.Global(key, next)
	}
	return true, next, nil
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || !utf8.ValidString(key) {
		return fmt.Errorf("global key %q: want 1 to %d bytes of UTF-8", key, MaxKeyLen)
	}
	return nil
}

// Checkpoint keeps state as the task's latest checkpoint, with c's
// message and op-log positions (Host.Checkpoint). A revoked attempt's
// checkpoint is refused.
func (v *State) Checkpoint(ctx context.Context, c *Cursor, state []byte) error {
	if len(state) > sdk.MaxCheckpointSize {
		return fmt.Errorf("checkpoint: %d bytes over the %d limit", len(state), sdk.MaxCheckpointSize)
	}
	state = append([]byte(nil), state...)
	var block string
	if v.store != nil {
		var err error
		if block, err = v.store(ctx, state); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-c.revoked:
		return errors.New("checkpoint: lease revoked")
	default:
	}
	ck := checkpoint{state: state, seq: c.consumed, pos: c.pos, at: time.Now(), block: block}
	v.ckpt[c.task] = ck
	if v.journal != nil {
		v.journal.Checkpoint(c.task, ck.export())
	}
	return nil
}

// Resume returns the task's latest checkpoint, if any, and rewinds c's
// message and op-log positions to it (Host.Resume).
func (v *State) Resume(c *Cursor) ([]byte, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ck, ok := v.ckpt[c.task]
	if !ok {
		return nil, false
	}
	c.consumed, c.pos = ck.seq, ck.pos
	c.resumed.Store(true)
	return ck.state, true
}
