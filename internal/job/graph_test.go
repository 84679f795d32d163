package job

import (
	"slices"
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/spec"
)

// TestTaskKeyOwnInputs: the inputs a task sees of its own (a stage's
// upstream outputs) are in its key and in the job ID: an output of
// another digest changes the key of the task that sees it and of no
// other; a task without inputs of its own keeps the key of a flat job.
func TestTaskKeyOwnInputs(t *testing.T) {
	job, err := spec.Parse("job.yaml", []byte("plugin: ./p\ntasks:\n  - {id: one}\n  - {id: two}\n  - {id: three}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plugin := digest.Sum([]byte("plugin"))
	prepared := func(sq string) *Prepared {
		own := [][]Input{
			{{Name: "needs/a/0000/sq.txt", Digest: digest.Sum([]byte("1"))}},
			{{Name: "needs/a/0001/sq.txt", Digest: digest.Sum([]byte(sq))}},
			nil,
		}
		p := &Prepared{Spec: job, keyBase: NewKeyBase(plugin, nil, job.Sandbox), taskInputs: func(i int) []Input { return own[i] }}
		p.ID = p.withTaskInputs(JobID(job, plugin, nil))
		return p
	}
	a, b := prepared("4"), prepared("5")
	if a.ID == b.ID {
		t.Error("an input of a task's own left the job ID as it was")
	}
	if a.TaskKey(0) != b.TaskKey(0) || a.TaskKey(2) != b.TaskKey(2) || a.TaskKey(1) == b.TaskKey(1) {
		t.Error("the changed input changed other keys than that of the task that sees it, or not its own")
	}
	flat := &Prepared{Spec: job, keyBase: NewKeyBase(plugin, nil, job.Sandbox)}
	if a.TaskKey(2) != flat.TaskKey(2) || a.TaskKey(0) == flat.TaskKey(0) {
		t.Error("a task without inputs of its own has another key than in a flat job, or one with them the same")
	}
}

// TestRunList: a stage's run maps its tasks to the stage's in order,
// whether every task runs (a count, no list) or some are left out.
func TestRunList(t *testing.T) {
	for _, c := range []struct {
		name string
		run  []bool // by task of the stage: in the run
		want []int  // the stage's task of each task of the run
		list bool   // a list was made
	}{
		{"none", nil, nil, false},
		{"all", []bool{true, true, true}, []int{0, 1, 2}, false},
		{"first out", []bool{false, true, true}, []int{1, 2}, true},
		{"middle out", []bool{true, false, true, false, true}, []int{0, 2, 4}, true},
		{"last out", []bool{true, true, false}, []int{0, 1}, true},
		{"all out", []bool{false, false}, nil, true},
	} {
		var l runList
		for i, in := range c.run {
			if in {
				l.add(i)
			} else {
				l.skip(i)
			}
		}
		var got []int
		for n := range l.n {
			got = append(got, l.at(n))
		}
		if !slices.Equal(got, c.want) || (l.list != nil || l.holes) != c.list {
			t.Errorf("%s: tasks %v (list %v), want %v (list %v)", c.name, got, l.holes, c.want, c.list)
		}
	}
}
