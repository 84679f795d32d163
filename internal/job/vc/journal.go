package vc

import (
	"cmp"
	"slices"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Journal keeps a State durable (the job database): every change is
// passed to it, in order, with the State's lock held, so it must not
// block for long nor call back into the State. A State given to Restore
// what a Journal kept comes back as it was.
type Journal interface {
	// Global: key was set to g.
	Global(key string, g sdk.Global)
	// Message: m was queued for task to.
	Message(to string, m sdk.Message)
	// Checkpoint: task's latest checkpoint is now c.
	Checkpoint(task string, c Saved)
	// Op: entry n of task's op log is o.
	Op(task string, n int, o Op)
	// TruncateOps: task's op log keeps its first n entries only (an
	// attempt diverged from it).
	TruncateOps(task string, n int)
}

// Saved is a task's checkpoint as it is kept.
type Saved struct {
	State []byte
	Seq   uint64 // messages consumed when it was taken
	Pos   int    // length of the task's op log when it was taken
	At    time.Time
	Block string // the block ID the store keeps it under, if any
}

// Op is an entry of a task's op log as it is kept.
type Op struct {
	Op, Key string
	OK      bool
	Global  sdk.Global
	Err     string
}

// Snapshot is a State's content, as a Journal kept it.
type Snapshot struct {
	Globals     map[string]sdk.Global
	Messages    map[string][]sdk.Message // by recipient; any order
	Checkpoints map[string]Saved
	Ops         map[string]map[int]Op // by task, by position
}

func (r opRecord) export() Op { return Op{Op: r.op, Key: r.key, OK: r.ok, Global: r.g, Err: r.err} }

func (c checkpoint) export() Saved {
	return Saved{State: c.state, Seq: c.seq, Pos: c.pos, At: c.at, Block: c.block}
}

// SetJournal makes j keep every later change of v.
func (v *State) SetJournal(j Journal) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.journal = j
}

// Restore puts back what a Journal kept, before any task uses v: the
// globals, each task's messages (a mailbox holds its messages 1..n; it
// stops at the first gap), checkpoints and op logs (up to the first gap;
// a checkpoint past its log's end is dropped). What names a task that
// is not the job's is skipped. It returns what it restored.
func (v *State) Restore(s Snapshot) (globals, messages, checkpoints int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, g := range s.Globals {
		if checkKey(k) == nil && len(v.globals) < MaxGlobals {
			v.globals[k] = g
			globals++
		}
	}
	for to, ms := range s.Messages {
		if !v.isTaskLocked(to) {
			continue
		}
		ms = slices.SortedFunc(slices.Values(ms), func(a, b sdk.Message) int { return cmp.Compare(a.Seq, b.Seq) })
		b := v.box(to)
		for _, m := range ms {
			if m.Seq != uint64(len(b.msgs)+1) || len(b.msgs) >= MaxQueued {
				break
			}
			b.msgs = append(b.msgs, m)
			messages++
		}
	}
	for task, ops := range s.Ops {
		if !v.isTaskLocked(task) {
			continue
		}
		var log []opRecord
		for n := 0; ; n++ {
			o, ok := ops[n]
			if !ok || n >= MaxOpLog {
				break
			}
			log = append(log, opRecord{op: o.Op, key: o.Key, ok: o.OK, g: o.Global, err: o.Err})
		}
		v.ops[task] = log
	}
	for task, c := range s.Checkpoints {
		if !v.isTaskLocked(task) || c.Pos > len(v.ops[task]) || c.Seq > uint64(len(v.box(task).msgs)) {
			v.log.Warn("a kept checkpoint does not fit the task's kept state; the task starts afresh", "task", task)
			continue
		}
		v.ckpt[task] = checkpoint{state: c.State, seq: c.Seq, pos: c.Pos, at: c.At, block: c.Block}
		checkpoints++
	}
	return globals, messages, checkpoints
}
