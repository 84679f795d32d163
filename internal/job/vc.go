package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The job's "virtual computer" (Fenech and Vella): the coordinator holds
// the state tasks share — messages between tasks, job-global variables,
// checkpoints — so that it survives any peer. Every Host call of a task,
// local or remote, ends up here.

// Limits of the shared state.
const (
	maxGlobals       = 10000
	maxKeyLen        = 256
	maxQueued        = 10000 // messages waiting for one task
	maxPartials      = 100   // partial results kept per task in the report
	maxPartialReport = 4 << 10
)

// vcState is the shared state of a job's tasks.
type vcState struct {
	mu      sync.Mutex
	tasks   map[string]bool // valid task IDs
	globals map[string]sdk.Global
	mail    map[string]*mailbox
	ckpt    map[string]checkpoint
	ops     map[string][]opRecord
	store   func(ctx context.Context, data []byte) error // keeps checkpoints as blocks, if set
	log     *slog.Logger
}

type mailbox struct {
	msgs   []sdk.Message // seq 1..n
	notify chan struct{} // closed and replaced on arrival
}

type checkpoint struct {
	state []byte
	seq   uint64 // messages consumed when it was taken
	pos   int    // length of the task's op log when it was taken
	at    time.Time
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

// maxOpLog bounds a task's op log; beyond it operations are applied
// without being recorded (and would be applied again by a resumed task).
const maxOpLog = 1 << 20

func newVC(taskIDs []string) *vcState {
	v := &vcState{
		tasks:   map[string]bool{},
		globals: map[string]sdk.Global{},
		mail:    map[string]*mailbox{},
		ckpt:    map[string]checkpoint{},
		ops:     map[string][]opRecord{},
		log:     slog.Default(),
	}
	for _, id := range taskIDs {
		v.tasks[id] = true
	}
	return v
}

func (v *vcState) box(id string) *mailbox {
	b := v.mail[id]
	if b == nil {
		b = &mailbox{notify: make(chan struct{})}
		v.mail[id] = b
	}
	return b
}

// do runs one shared-state operation of l through the task's op log:
// replayed if an earlier attempt already made it, else applied (under the
// lock) and recorded.
func (v *vcState) do(l *lease, op, key string, apply func() opRecord) opRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	log := v.ops[l.taskID]
	if l.pos < len(log) {
		if r := log[l.pos]; r.op == op && r.key == key {
			l.pos++
			return r
		}
		v.log.Warn("task diverged from its earlier attempt; replay stops", "task", l.taskID, "at", l.pos, "want", log[l.pos].op+" "+log[l.pos].key, "got", op+" "+key)
		v.ops[l.taskID] = log[:l.pos:l.pos]
	}
	r := apply()
	r.op, r.key = op, key
	if len(v.ops[l.taskID]) < maxOpLog {
		v.ops[l.taskID] = append(v.ops[l.taskID], r)
		l.pos++
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

func (v *vcState) send(l *lease, to string, data []byte) error {
	if len(data) > sdk.MaxMessageSize {
		return fmt.Errorf("send to %s: message of %d bytes over the %d limit", to, len(data), sdk.MaxMessageSize)
	}
	return v.do(l, "send", to, func() opRecord {
		return opRecord{err: errString(v.deliverLocked(l.taskID, to, data))}
	}).error()
}

// deliverLocked appends a message to the recipient's mailbox.
func (v *vcState) deliverLocked(from, to string, data []byte) error {
	if !v.tasks[to] {
		return fmt.Errorf("send to %s: no such task in this job", to)
	}
	b := v.box(to)
	if len(b.msgs) >= maxQueued {
		return fmt.Errorf("send to %s: %d messages already queued", to, maxQueued)
	}
	b.msgs = append(b.msgs, sdk.Message{From: from, Data: append([]byte(nil), data...), Seq: uint64(len(b.msgs) + 1)})
	close(b.notify)
	b.notify = make(chan struct{})
	return nil
}

// recv waits for the message after l's last one.
func (v *vcState) recv(ctx context.Context, l *lease) (sdk.Message, error) {
	for {
		v.mu.Lock()
		b := v.box(l.taskID)
		if int(l.consumed) < len(b.msgs) {
			m := b.msgs[l.consumed]
			l.consumed++
			v.mu.Unlock()
			return m, nil
		}
		notify := b.notify
		v.mu.Unlock()
		select {
		case <-ctx.Done():
			return sdk.Message{}, ctx.Err()
		case <-l.revoked:
			return sdk.Message{}, errors.New("lease revoked")
		case <-notify:
		}
	}
}

func (v *vcState) load(l *lease, key string) (sdk.Global, error) {
	if err := checkKey(key); err != nil {
		return sdk.Global{}, err
	}
	r := v.do(l, "load", key, func() opRecord { return opRecord{g: v.globals[key]} })
	return r.g, r.error()
}

func (v *vcState) storeGlobal(l *lease, key string, value []byte) (sdk.Global, error) {
	_, g, err := v.cas(l, key, 0, value, true)
	return g, err
}

// cas sets key to value if it is at version (or always, with force).
func (v *vcState) cas(l *lease, key string, version uint64, value []byte, force bool) (bool, sdk.Global, error) {
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
	r := v.do(l, op, key, func() opRecord {
		ok, g, err := v.casLocked(key, version, value, force)
		return opRecord{ok: ok, g: g, err: errString(err)}
	})
	return r.ok, r.g, r.error()
}

func (v *vcState) casLocked(key string, version uint64, value []byte, force bool) (bool, sdk.Global, error) {
	cur, exists := v.globals[key]
	if !force && cur.Version != version {
		return false, cur, nil
	}
	if !exists && len(v.globals) >= maxGlobals {
		return false, cur, fmt.Errorf("global %s: the job already has %d variables", key, maxGlobals)
	}
	next := sdk.Global{Version: cur.Version + 1, Value: append([]byte(nil), value...)}
	v.globals[key] = next
	return true, next, nil
}

func checkKey(key string) error {
	if key == "" || len(key) > maxKeyLen || !utf8.ValidString(key) {
		return fmt.Errorf("global key %q: want 1 to %d bytes of UTF-8", key, maxKeyLen)
	}
	return nil
}

func (v *vcState) checkpoint(ctx context.Context, l *lease, state []byte) error {
	if len(state) > sdk.MaxCheckpointSize {
		return fmt.Errorf("checkpoint: %d bytes over the %d limit", len(state), sdk.MaxCheckpointSize)
	}
	state = append([]byte(nil), state...)
	if v.store != nil {
		if err := v.store(ctx, state); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-l.revoked:
		return errors.New("checkpoint: lease revoked")
	default:
	}
	v.ckpt[l.taskID] = checkpoint{state: state, seq: l.consumed, pos: l.pos, at: time.Now()}
	return nil
}

// resume returns the task's latest checkpoint and rewinds the lease's
// message position to it.
// wasResumed reports whether l resumed from a checkpoint.
func (v *vcState) wasResumed(l *lease) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return l.resumed
}

func (v *vcState) resume(l *lease) ([]byte, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.ckpt[l.taskID]
	if !ok {
		return nil, false
	}
	l.consumed, l.pos = c.seq, c.pos
	l.resumed = true
	return c.state, true
}

// leaseHost is the Host that a lease's task sees on the coordinator's
// side: local slots use it directly, remote peers through HostCall.
type leaseHost struct {
	r *runner
	l *lease
}

var _ sdk.Host = (*leaseHost)(nil)

func (h *leaseHost) Progress(_ context.Context, fraction float64, note string) error {
	h.r.opts.Events.TaskProgress(h.l.taskID, fraction, note)
	return nil
}

func (h *leaseHost) Partial(_ context.Context, data []byte) error {
	h.r.opts.Events.TaskPartial(h.l.taskID, data)
	h.r.addPartial(h.l, data)
	return nil
}

func (h *leaseHost) Send(_ context.Context, to string, data []byte) error {
	return h.r.vc.send(h.l, to, data)
}

func (h *leaseHost) Recv(ctx context.Context) (sdk.Message, error) { return h.r.vc.recv(ctx, h.l) }

func (h *leaseHost) Load(_ context.Context, key string) (sdk.Global, error) {
	return h.r.vc.load(h.l, key)
}

func (h *leaseHost) Store(_ context.Context, key string, value []byte) (sdk.Global, error) {
	return h.r.vc.storeGlobal(h.l, key, value)
}

func (h *leaseHost) CompareAndSwap(_ context.Context, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	return h.r.vc.cas(h.l, key, version, value, false)
}

func (h *leaseHost) Checkpoint(ctx context.Context, state []byte) error {
	if err := h.r.vc.checkpoint(ctx, h.l, state); err != nil {
		return err
	}
	h.r.mu.Lock()
	h.r.rep.Tasks[h.l.task].Checkpoints++
	h.r.dirty = true
	h.r.mu.Unlock()
	return nil
}

func (h *leaseHost) Resume(context.Context) ([]byte, bool, error) {
	state, ok := h.r.vc.resume(h.l)
	return state, ok, nil
}

// addPartial keeps a task's partial result in the report (the last
// maxPartials, each cut to maxPartialReport bytes).
func (r *runner) addPartial(l *lease, data []byte) {
	p := report.Partial{Time: time.Now().UTC(), Peer: l.peer}
	if len(data) > maxPartialReport {
		data, p.Truncated = data[:maxPartialReport], true
	}
	if utf8.Valid(data) {
		p.Text = string(data)
	} else {
		p.Bytes = data
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &r.rep.Tasks[l.task]
	t.Partials = append(t.Partials, p)
	if len(t.Partials) > maxPartials {
		t.Partials = t.Partials[len(t.Partials)-maxPartials:]
	}
	r.dirty = true
}
