package spec

import (
	"sort"
	"strconv"
	"strings"
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
	case "grid":
		s.axes = e.axes
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
