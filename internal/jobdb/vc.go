package jobdb

import (
	"context"
	"database/sql"
	"time"
)

// The virtual computer's state (schema 2): the job's global variables,
// the messages sent to each task, each task's latest checkpoint (the
// block ID the submitter's store keeps it under, and its bytes) and each
// task's log of shared-state operations. Changes go through the same
// group commit as the tasks', in the order they were made: a crash keeps
// a prefix of them.

// VCCheckpoint is a task's latest checkpoint.
type VCCheckpoint struct {
	Seq   uint64 // messages the task had consumed
	Pos   int    // length of its op log
	Time  time.Time
	Block string // block ID in the submitter's store ("" if none)
	State []byte
}

// VCOp is entry n of a task's op log.
type VCOp struct {
	Op, Key string
	OK      bool
	Version uint64
	Value   []byte
	Error   string
}

// VCMessage is message seq of a task's mailbox.
type VCMessage struct {
	Seq    uint64
	Sender string
	Data   []byte
}

// VCGlobal is a global variable.
type VCGlobal struct {
	Version uint64
	Value   []byte
}

// VCState is the virtual computer's state as kept.
type VCState struct {
	Globals     map[string]VCGlobal
	Messages    map[string][]VCMessage // by recipient task, by seq
	Checkpoints map[string]VCCheckpoint
	Ops         map[string]map[int]VCOp // by task, by position
}

const (
	qVCGlobal     = "INSERT OR REPLACE INTO vc_globals(key, version, value) VALUES (?, ?, ?)"
	qVCMessage    = "INSERT OR REPLACE INTO vc_messages(task, seq, sender, data) VALUES (?, ?, ?, ?)"
	qVCCheckpoint = "INSERT OR REPLACE INTO vc_checkpoints(task, seq, pos, time, block, state) VALUES (?, ?, ?, ?, ?, ?)"
	qVCOp         = "INSERT OR REPLACE INTO vc_ops(task, n, op, key, ok, version, value, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
	qVCTruncate   = "DELETE FROM vc_ops WHERE task = ? AND n >= ?"
)

// The changes carry no key: they are written in order, none replaces
// another (an op log truncated and written again must stay so).

// PutVCGlobal queues global key at version with value.
func (db *DB) PutVCGlobal(key string, version uint64, value []byte) error {
	value = nonNil(value)
	return db.w.put(change{apply: func(tx *batch) error { return tx.exec(qVCGlobal, key, int64(version), value) }})
}

// PutVCMessage queues message m of task's mailbox.
func (db *DB) PutVCMessage(task string, m VCMessage) error {
	m.Data = nonNil(m.Data)
	return db.w.put(change{apply: func(tx *batch) error {
		return tx.exec(qVCMessage, task, int64(m.Seq), m.Sender, m.Data)
	}})
}

// PutVCCheckpoint queues task's latest checkpoint.
func (db *DB) PutVCCheckpoint(task string, c VCCheckpoint) error {
	c.State = nonNil(c.State)
	return db.w.put(change{apply: func(tx *batch) error {
		return tx.exec(qVCCheckpoint, task, int64(c.Seq), c.Pos, fmtTime(c.Time), c.Block, c.State)
	}})
}

// PutVCOp queues entry n of task's op log.
func (db *DB) PutVCOp(task string, n int, o VCOp) error {
	return db.w.put(change{apply: func(tx *batch) error {
		return tx.exec(qVCOp, task, n, o.Op, o.Key, o.OK, int64(o.Version), o.Value, o.Error)
	}})
}

// TruncateVCOps queues the removal of task's op log from entry n on.
func (db *DB) TruncateVCOps(task string, n int) error {
	return db.w.put(change{apply: func(tx *batch) error { return tx.exec(qVCTruncate, task, n) }})
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ReadVC reads the virtual computer's state. A database of schema 1 has
// none: the state is empty.
func (db *DB) ReadVC(ctx context.Context) (*VCState, error) {
	s := &VCState{Globals: map[string]VCGlobal{}, Messages: map[string][]VCMessage{},
		Checkpoints: map[string]VCCheckpoint{}, Ops: map[string]map[int]VCOp{}}
	err := db.each(ctx, "SELECT key, version, value FROM vc_globals", func(rows *sql.Rows) error {
		var k string
		var g VCGlobal
		var v int64
		if err := rows.Scan(&k, &v, &g.Value); err != nil {
			return err
		}
		g.Version = uint64(v)
		s.Globals[k] = g
		return nil
	})
	if err != nil {
		if isNoTable(err) {
			return s, nil // schema 1
		}
		return nil, err
	}
	err = db.each(ctx, "SELECT task, seq, sender, data FROM vc_messages ORDER BY task, seq", func(rows *sql.Rows) error {
		var task string
		var m VCMessage
		var seq int64
		if err := rows.Scan(&task, &seq, &m.Sender, &m.Data); err != nil {
			return err
		}
		m.Seq = uint64(seq)
		s.Messages[task] = append(s.Messages[task], m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = db.each(ctx, "SELECT task, seq, pos, time, block, state FROM vc_checkpoints", func(rows *sql.Rows) error {
		var task, at string
		var c VCCheckpoint
		var seq int64
		if err := rows.Scan(&task, &seq, &c.Pos, &at, &c.Block, &c.State); err != nil {
			return err
		}
		c.Seq, c.Time = uint64(seq), parseTime(at)
		s.Checkpoints[task] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = db.each(ctx, "SELECT task, n, op, key, ok, version, value, error FROM vc_ops", func(rows *sql.Rows) error {
		var task string
		var n int
		var o VCOp
		var v int64
		if err := rows.Scan(&task, &n, &o.Op, &o.Key, &o.OK, &v, &o.Value, &o.Error); err != nil {
			return err
		}
		o.Version = uint64(v)
		if s.Ops[task] == nil {
			s.Ops[task] = map[int]VCOp{}
		}
		s.Ops[task][n] = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
