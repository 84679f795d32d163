package spec

import (
	"strings"
	"testing"
)

// TestTasksOnDemand: generators are expanded task by task, as the
// materialised expansion did: IDs, params (odometer order for grids,
// a running sum for ranges), and a million tasks cost no memory per task.
func TestTasksOnDemand(t *testing.T) {
	for _, c := range []struct {
		src    string
		n      int
		probes map[int]string // index -> "id params"
	}{
		{"tasks: [{range: {param: i, from: 0, to: 999999}}]", 1_000_000,
			map[int]string{0: `000000 {"i":0}`, 999_999: `999999 {"i":999999}`, 123_456: `123456 {"i":123456}`}},
		{"tasks: [{range: {param: n, from: 10, to: 0, step: -3}}]", 4,
			map[int]string{0: `0000 {"n":10}`, 3: `0003 {"n":1}`}},
		{"params: {k: job}\ntasks: [{id: first}, {grid: {a: [1, 2, 3], b: [x, y]}, params: {k: entry}}, {}]", 8,
			map[int]string{0: `first {"k":"job"}`, 1: `0001 {"a":1,"b":"x","k":"entry"}`, 2: `0002 {"a":1,"b":"y","k":"entry"}`,
				3: `0003 {"a":2,"b":"x","k":"entry"}`, 6: `0006 {"a":3,"b":"y","k":"entry"}`, 7: `0007 {"k":"job"}`}},
	} {
		j := parse(t, "plugin: p\n"+c.src)
		if j.Tasks.Len() != c.n {
			t.Fatalf("%s: %d tasks, want %d", c.src, j.Tasks.Len(), c.n)
		}
		if len(j.Tasks.segs) > 3 {
			t.Errorf("%s: %d segments: expanded", c.src, len(j.Tasks.segs))
		}
		for i, want := range c.probes {
			got := j.Tasks.ID(i) + " " + string(j.TaskParamsJSON(i))
			if got != want || j.Tasks.At(i).ID != j.Tasks.ID(i) {
				t.Errorf("%s: task %d is %s, want %s", c.src, i, got, want)
			}
		}
	}
}

// TestTaskList: a list of explicit tasks reads back as given.
func TestTaskList(t *testing.T) {
	l := TaskList([]Task{{ID: "a", Params: map[string]any{"x": int64(1)}}, {ID: "b", Params: map[string]any{}}})
	if l.Len() != 2 || l.ID(1) != "b" || l.At(0).Params["x"] != int64(1) {
		t.Fatalf("list %+v", l)
	}
	j := &Job{Tasks: l}
	if got := string(j.TaskParamsJSON(0)); got != `{"x":1}` {
		t.Errorf("params %s", got)
	}
	if !strings.Contains(string(j.Canonical()), `"tasks":[{"id":"a","params":{"x":1}},{"id":"b","params":{}}],"timeout_ns"`) {
		t.Errorf("canonical %s", j.Canonical())
	}
}

// TestParamsJSONAsEncoded: a generator's task params, encoded from the
// segment's pieces, are the bytes the canonical encoding of the task's
// params map gives, for every task and every kind of value.
func TestParamsJSONAsEncoded(t *testing.T) {
	for _, src := range []string{
		"tasks: [{range: {param: i, from: -5, to: 5}}]",
		"tasks: [{range: {param: i, from: 9223372036854775800, to: 9223372036854775807, step: 3}}]",
		`params: {s: "a \"q\" <b> & \\ é \u2028 \t", f: 0.1, g: 1e21, h: -0.0, n: null, t: true, l: [1, "x", {z: 1}], m: {b: 2, a: [ ]}, i: job, a: shadowed}
tasks: [{range: {param: i, from: 0, to: 3}}, {grid: {a: [1, 2.5, "x", null, [1]], s: [{k: v}, false]}, params: {zz: 1}}, {id: one, params: {x: "<y>"}}]`,
		"tasks: [{grid: {a1: [1, 2], a2: [1], a3: [1, 2], a4: [3], a5: [4, 5], a6: [6], a7: [7], a8: [8, 9], a9: [0, 1], b: [x]}}]",
		"params: {k: v}\ntasks: [{}, {range: {param: k, from: 1, to: 2}}]",
	} {
		j := parse(t, "plugin: p\n"+src)
		for i := range j.Tasks.Len() {
			if got, want := string(j.TaskParamsJSON(i)), string(encode(nonNil(j.Tasks.At(i).Params))); got != want {
				t.Errorf("%s: task %d: params %s, want %s", src, i, got, want)
			}
		}
	}
}
