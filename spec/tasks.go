package spec

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Tasks is a job's task list, in spec order. Generators (range, grid) are
// kept as they were written and expanded one task at a time, on demand:
// a range of a million tasks costs a few words, not a million parameter
// maps. The zero value is an empty list.
type Tasks struct {
	segs []segment
	n    int
}

// segment is one tasks entry (or one task of TaskList): the tasks
// [start, start+count).
type segment struct {
	start, count int
	id           string         // explicit id of a single task ("" if none)
	base         map[string]any // job params overlaid with the entry's (shared, read-only)
	pos          Pos
	width        int // of generated ids
	// range (param != "")
	param      string
	from, step int64
	// grid (axes != nil)
	axes []axis
	// enc is a generator's params encoded once (paramsJSON), shared by
	// the copies of the list; nil for a single task.
	enc *paramsEnc
}

// paramsEnc is a segment's params as canonical JSON, in pieces: each key
// in sorted order with its value encoded, or the generated parameter
// (range) or axis (grid) that gives it per task.
type paramsEnc struct {
	once    sync.Once
	entries []paramsEntry
	// axes holds each grid axis's values, encoded.
	axes [][][]byte
	// size is about the length of a task's params: room made at once.
	size int
}

type paramsEntry struct {
	key []byte // `"key":`
	val []byte // the base's value; nil for a generated one
	// axis is the grid axis of a generated value; -1: the range param.
	axis int
}

// paramsJSON appends the params of the segment's task k (its index in
// the segment) to b as canonical JSON, the bytes encode(At(i).Params)
// gives, without a map or reflection per task.
func (s *segment) paramsJSON(b []byte, k int) []byte {
	e := s.enc
	e.once.Do(func() { e.build(s) })
	b = slices.Grow(b, e.size)
	// The grid's odometer: the last axis turns fastest.
	var idx [8]int
	var pos []int
	if s.axes != nil {
		pos = idx[:0]
		if len(s.axes) > len(idx) {
			pos = make([]int, 0, len(s.axes))
		}
		pos = pos[:len(s.axes)]
		for a := len(s.axes) - 1; a >= 0; a-- {
			n := len(s.axes[a].values)
			pos[a] = k % n
			k /= n
		}
	}
	b = append(b, '{')
	for i, en := range e.entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, en.key...)
		switch {
		case en.val != nil:
			b = append(b, en.val...)
		case en.axis < 0:
			b = strconv.AppendInt(b, s.from+int64(k)*s.step, 10) // wraps as At does
		default:
			b = append(b, e.axes[en.axis][pos[en.axis]]...)
		}
	}
	return append(b, '}')
}

func (e *paramsEnc) build(s *segment) {
	gen := map[string]int{}
	switch {
	case s.param != "":
		gen[s.param] = -1
	case s.axes != nil:
		e.axes = make([][][]byte, len(s.axes))
		for a, ax := range s.axes {
			gen[ax.key] = a
			for _, v := range ax.values {
				e.axes[a] = append(e.axes[a], encode(v))
			}
		}
	}
	keys := make([]string, 0, len(s.base)+len(gen))
	for k := range s.base {
		if _, ok := gen[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k := range gen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		en := paramsEntry{key: append(encode(k), ':'), axis: -1}
		if a, ok := gen[k]; ok {
			en.axis = a
			e.size += 20 // an int64's digits; a grid's values vary
		} else {
			en.val = encode(s.base[k])
		}
		e.entries = append(e.entries, en)
		e.size += len(en.key) + len(en.val) + 1
	}
}

// TaskList makes a task list of explicit tasks (IDs as given; each task's
// Params is used, read-only, as the base of the maps At returns).
func TaskList(tasks []Task) Tasks {
	l := Tasks{segs: make([]segment, len(tasks)), n: len(tasks)}
	for i, t := range tasks {
		l.segs[i] = segment{start: i, count: 1, id: t.ID, base: t.Params, pos: t.Pos}
	}
	return l
}

// Len is the number of tasks.
func (l Tasks) Len() int { return l.n }

// seg returns the segment holding task i. It panics if i is out of range.
func (l Tasks) seg(i int) *segment {
	if i < 0 || i >= l.n {
		panic("spec: task index " + strconv.Itoa(i) + " out of range")
	}
	k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].start+l.segs[k].count > i })
	return &l.segs[k]
}

// ID returns task i's ID. It panics if i is out of range.
func (l Tasks) ID(i int) string {
	s := l.seg(i)
	if s.id != "" {
		return s.id
	}
	return paddedID(i, s.width)
}

// At returns task i, with a params map of its own. It panics if i is out
// of range.
func (l Tasks) At(i int) Task {
	s := l.seg(i)
	t := Task{ID: l.ID(i), Pos: s.pos}
	extra := 0
	switch {
	case s.param != "":
		extra = 1
	case s.axes != nil:
		extra = len(s.axes)
	}
	m := make(map[string]any, len(s.base)+extra)
	for k, v := range s.base {
		m[k] = v
	}
	k := i - s.start
	switch {
	case s.param != "":
		m[s.param] = s.from + int64(k)*s.step // wraps as the running sum did
	case s.axes != nil:
		// Odometer: the last axis turns fastest.
		for a := len(s.axes) - 1; a >= 0; a-- {
			n := len(s.axes[a].values)
			m[s.axes[a].key] = s.axes[a].values[k%n]
			k /= n
		}
	}
	t.Params = m
	return t
}

// paramsJSON is task i's params as canonical JSON: encode of At(i)'s
// params.
func (l Tasks) paramsJSON(i int) []byte {
	s := l.seg(i)
	if s.enc == nil { // a single task
		return encode(nonNil(l.At(i).Params))
	}
	return s.paramsJSON(nil, i-s.start)
}

// paddedID is a generated task ID: the task's index, zero-padded to width.
func paddedID(i, width int) string {
	s := strconv.Itoa(i)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// segmentOf makes the segment of entry e, starting at task start.
func (e *entry) segment(start int, jobParams map[string]any, width int) segment {
	base := jobParams
	if len(e.params) > 0 {
		base = make(map[string]any, len(jobParams)+len(e.params))
		for k, v := range jobParams {
			base[k] = v
		}
		for k, v := range e.params {
			base[k] = v
		}
	}
	s := segment{start: start, count: int(e.count), base: base, pos: Pos{max(e.node.Line, 1), max(e.node.Column, 1)}, width: width}
	switch e.kind {
	case "task":
		s.id = e.id
	case "range":
		s.param, s.from, s.step = e.param, e.from, e.step
		s.enc = &paramsEnc{}
	case "grid":
		s.axes = e.axes
		s.enc = &paramsEnc{}
	}
	return s
}

// duplicate is a task whose ID an earlier task has.
type duplicate struct {
	index int
	id    string
	pos   Pos // of the task at index
	first Pos // of the earlier task
}

// duplicates finds the tasks whose ID an earlier task has, in task order.
// Generated IDs (zero-padded indexes, all of one width) differ from each
// other, so only explicit IDs are compared: with each other, and with the
// generated ID they may spell.
func (l Tasks) duplicates() []duplicate {
	type use struct {
		index int
		pos   Pos
	}
	uses := map[string][]use{}
	var explicit []string
	for _, s := range l.segs {
		if s.id == "" {
			continue
		}
		if uses[s.id] == nil {
			explicit = append(explicit, s.id)
		}
		uses[s.id] = append(uses[s.id], use{s.start, s.pos})
	}
	var dups []duplicate
	for _, id := range explicit {
		us := uses[id]
		if i, ok := l.generatedIndex(id); ok {
			us = append(us, use{i, l.seg(i).pos})
			sort.Slice(us, func(a, b int) bool { return us[a].index < us[b].index })
		}
		for _, u := range us[1:] {
			dups = append(dups, duplicate{index: u.index, id: id, pos: u.pos, first: us[0].pos})
		}
	}
	sort.Slice(dups, func(a, b int) bool { return dups[a].index < dups[b].index })
	return dups
}

// generatedIndex returns the task whose generated ID is id, if any.
func (l Tasks) generatedIndex(id string) (int, bool) {
	if id == "" || strings.TrimLeft(id, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(id)
	if err != nil || i >= l.n {
		return 0, false
	}
	s := l.seg(i)
	if s.id != "" || paddedID(i, s.width) != id {
		return 0, false
	}
	return i, true
}
