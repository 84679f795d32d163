package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The layout of a task in report.json: EncodeEach writes each task as
// json.MarshalIndent(task, taskPrefix, indent) after a taskPrefix.
const (
	taskPrefix = "    "
	indent     = "  "
)

// AppendTask appends task t as report.json holds it: the bytes of
// json.MarshalIndent(t, "    ", "  ") with peers named by name and ID (as
// SplitPeerIDs names them; t itself is not changed). It writes the common
// fields itself, several times faster than encoding/json's reflection,
// and leaves to encoding/json what needs escaping or checking (strings
// with characters JSON escapes, the parameters, times outside years
// 0-9999), so that the bytes are the same; a test holds it to that.
func AppendTask(dst []byte, t *Task) ([]byte, error) {
	e := encoder{b: dst}
	e.task(t)
	if e.err != nil {
		return dst, fmt.Errorf("encode report: task %s: %w", t.ID, e.err)
	}
	return e.b, nil
}

// encoder appends JSON to b; the first error sticks.
type encoder struct {
	b   []byte
	err error
}

// line starts a new line at depth levels of indentation below the task's.
func (e *encoder) line(depth int) {
	e.b = append(e.b, '\n')
	e.b = append(e.b, taskPrefix...)
	for range depth {
		e.b = append(e.b, indent...)
	}
}

// key starts field name at depth: a comma after the previous field
// unless first, a new line, the quoted name and ": ".
func (e *encoder) key(depth int, first bool, name string) {
	if !first {
		e.b = append(e.b, ',')
	}
	e.line(depth)
	e.b = append(e.b, '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':', ' ')
}

// str appends s as a JSON string, as encoding/json writes it.
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil && e.err == nil {
				e.err = err
			}
			e.b = append(e.b, q...)
			return
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

// params appends a task's parameters, as encoding/json compacts and
// escapes them, indented at depth 1.
func (e *encoder) params(raw json.RawMessage) {
	if raw == nil {
		e.b = append(e.b, "null"...)
		return
	}
	if plainJSON(raw) {
		// Compact and nothing to escape: only the indentation to add.
		buf := bytes.NewBuffer(e.b)
		err := json.Indent(buf, raw, taskPrefix+indent, indent)
		if err == nil {
			e.b = buf.Bytes()
			return
		}
	}
	p, err := json.MarshalIndent(raw, taskPrefix+indent, indent)
	if err != nil && e.err == nil {
		e.err = err
	}
	e.b = append(e.b, p...)
}

// plainJSON says whether raw has no byte that encoding/json's compacting
// and escaping would change: no white space, no control or non-ASCII
// byte, none of < > &.
func plainJSON(raw []byte) bool {
	for _, c := range raw {
		if c <= ' ' || c > 0x7e || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return len(raw) > 0
}

// time appends tm as time.Time's MarshalJSON does.
func (e *encoder) time(tm time.Time) {
	if y := tm.Year(); y < 0 || y > 9999 {
		q, err := tm.MarshalJSON()
		if err != nil && e.err == nil {
			e.err = err
		}
		e.b = append(e.b, q...)
		return
	}
	e.b = append(e.b, '"')
	e.b = tm.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, "true"...)
	} else {
		e.b = append(e.b, "false"...)
	}
}

// peer splits a coordinator's peer key as splitPeerIDs does.
func peer(name, id string) (string, string) {
	if n, i := SplitPeer(name); i != "" {
		return n, i
	}
	return name, id
}

// peer writes the "peer" field at depth and, if the peer has one, its
// "peer_id".
func (e *encoder) peer(depth int, first bool, name, id string) {
	name, id = peer(name, id)
	e.key(depth, first, "peer")
	e.str(name)
	e.optStr(depth, "peer_id", id)
}

// optStr writes the string field name at depth unless v is empty.
func (e *encoder) optStr(depth int, name, v string) {
	if v != "" {
		e.key(depth, false, name)
		e.str(v)
	}
}

// list appends a JSON array of n elements at depth, each written by elem
// one level deeper (after its new line); nil is null.
func (e *encoder) list(depth, n int, isNil bool, elem func(i int)) {
	switch {
	case isNil:
		e.b = append(e.b, "null"...)
		return
	case n == 0:
		e.b = append(e.b, '[', ']')
		return
	}
	e.b = append(e.b, '[')
	for i := range n {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.line(depth + 1)
		elem(i)
	}
	e.line(depth)
	e.b = append(e.b, ']')
}

func (e *encoder) task(t *Task) {
	name, id := peer(t.Peer, t.PeerID)
	e.b = append(e.b, '{')
	e.key(1, true, "id")
	e.str(t.ID)
	e.key(1, false, "params")
	e.params(t.Params)
	e.key(1, false, "state")
	e.str(t.State)
	e.optStr(1, "peer", name)
	e.optStr(1, "peer_id", id)
	e.key(1, false, "attempts")
	e.list(1, len(t.Attempts), t.Attempts == nil, func(i int) { e.attempt(&t.Attempts[i]) })
	e.optStr(1, "error", t.Error)
	e.optStr(1, "digest", t.Digest)
	if len(t.Files) > 0 {
		e.key(1, false, "files")
		e.list(1, len(t.Files), false, func(i int) { e.str(t.Files[i]) })
	}
	if len(t.Votes) > 0 {
		e.key(1, false, "votes")
		e.list(1, len(t.Votes), false, func(i int) { e.vote(&t.Votes[i]) })
	}
	e.optStr(1, "verdict", t.Verdict)
	if t.Checkpoints != 0 {
		e.key(1, false, "checkpoints")
		e.b = strconv.AppendInt(e.b, int64(t.Checkpoints), 10)
	}
	if len(t.Partials) > 0 {
		e.key(1, false, "partials")
		e.list(1, len(t.Partials), false, func(i int) { e.partial(&t.Partials[i]) })
	}
	if t.Reused {
		e.key(1, false, "reused")
		e.b = append(e.b, "true"...)
	}
	e.line(0)
	e.b = append(e.b, '}')
}

// attempt, vote and partial write an element of a task's list (depth 2).
func (e *encoder) attempt(a *Attempt) {
	e.b = append(e.b, '{')
	e.peer(3, true, a.Peer, a.PeerID)
	e.key(3, false, "start")
	e.time(a.Start)
	e.key(3, false, "end")
	e.time(a.End)
	e.key(3, false, "outcome")
	e.str(a.Outcome)
	e.optStr(3, "error", a.Error)
	e.optStr(3, "device", a.Device)
	for _, f := range [...]struct {
		name string
		v    bool
	}{{"resumed", a.Resumed}, {"check", a.Check}, {"handed_over", a.HandedOver}} {
		if f.v {
			e.key(3, false, f.name)
			e.bool(true)
		}
	}
	e.line(2)
	e.b = append(e.b, '}')
}

func (e *encoder) vote(v *Vote) {
	e.b = append(e.b, '{')
	e.peer(3, true, v.Peer, v.PeerID)
	e.key(3, false, "digest")
	e.str(v.Digest)
	e.line(2)
	e.b = append(e.b, '}')
}

func (e *encoder) partial(p *Partial) {
	e.b = append(e.b, '{')
	e.key(3, true, "time")
	e.time(p.Time)
	e.peer(3, false, p.Peer, p.PeerID)
	e.optStr(3, "text", p.Text)
	if len(p.Bytes) > 0 {
		e.key(3, false, "bytes")
		e.b = append(e.b, '"')
		e.b = base64.StdEncoding.AppendEncode(e.b, p.Bytes)
		e.b = append(e.b, '"')
	}
	if p.Truncated {
		e.key(3, false, "truncated")
		e.bool(true)
	}
	e.line(2)
	e.b = append(e.b, '}')
}
