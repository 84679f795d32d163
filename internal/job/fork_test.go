package job

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
	"github.com/p2pc/p2pc/spec"
)

func forkRoot(id string) *forkNode {
	return &forkNode{ForkTask: ForkTask{ID: id, State: report.TaskPending}, parent: -1, params: map[string]any{}}
}

func children(n int) *pluginpb.Suspension {
	s := &pluginpb.Suspension{}
	for i := range n {
		s.Children = append(s.Children, json.RawMessage(`{"i":`+string(rune('0'+i))+`}`))
	}
	return s
}

// A suspension adds its children to the tree, after the limits.
func TestForkSuspendLimits(t *testing.T) {
	js := &spec.Job{Params: map[string]any{"n": int64(8)}, Spawn: &spec.Spawn{MaxDepth: 2, MaxChildren: 3}}
	for _, c := range []struct {
		name     string
		depth    int
		had, add int
		err      string
	}{
		{"fits", 1, 0, 3, ""},
		{"second wait", 1, 1, 2, ""},
		{"too deep", 2, 0, 1, "spawn: task t at depth 2 spawned children, beyond the job's max_depth 2 (spawn.max_depth in the spec)"},
		{"too many", 0, 2, 2, "spawn: task t spawned 4 children, more than the job's max_children 3 (spawn.max_children in the spec)"},
		{"none", 0, 0, 0, "spawn: the task was suspended without new children to wait for"},
	} {
		n := forkRoot("t")
		n.Depth = c.depth
		nodes := []*forkNode{n}
		for range c.had {
			n.spawned = append(n.spawned, json.RawMessage(`{}`))
		}
		if err := n.suspend(js, children(c.add), &nodes); err != nil {
			t.Fatal(err)
		}
		if c.err != "" {
			if n.State != report.TaskFailed || n.Error != c.err || len(nodes) != 1 {
				t.Errorf("%s: state %s, error %q, %d nodes", c.name, n.State, n.Error, len(nodes))
			}
			continue
		}
		if n.State != SuspendedState || len(nodes) != 1+c.add || len(n.Children) != c.add {
			t.Fatalf("%s: state %s, %d nodes, children %v", c.name, n.State, len(nodes), n.Children)
		}
		last := nodes[len(nodes)-1]
		if want := "t." + string(rune('0'+c.had+c.add-1)); last.ID != want || last.Parent != "t" || last.Depth != c.depth+1 || last.params["n"] != int64(8) || last.params["i"] != int64(c.add-1) {
			t.Errorf("%s: last child %+v, params %v; want ID %s", c.name, last.ForkTask, last.params, want)
		}
	}
}

// A failed child fails its suspended ancestors; a parent is ready when
// all its children are done.
func TestForkReadyAndFailures(t *testing.T) {
	js := &spec.Job{Params: map[string]any{}, Spawn: &spec.Spawn{MaxDepth: 4, MaxChildren: 4}}
	root := forkRoot("r")
	nodes := []*forkNode{root}
	if err := root.suspend(js, children(2), &nodes); err != nil {
		t.Fatal(err)
	}
	a, b := nodes[1], nodes[2]
	if got := readyNodes(nodes); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("ready %v, want the two children", got)
	}
	if err := a.suspend(js, children(1), &nodes); err != nil {
		t.Fatal(err)
	}
	b.State = report.TaskDone
	if got := readyNodes(nodes); len(got) != 1 || got[0] != 3 {
		t.Fatalf("ready %v, want the grandchild", got)
	}
	nodes[3].State, nodes[3].Error = report.TaskFailed, "boom"
	failChildren(nodes)
	if a.State != report.TaskFailed || root.State != report.TaskFailed || !strings.HasSuffix(root.Error, "child r.0.0 failed: boom") {
		t.Errorf("a %s %q, root %s %q", a.State, a.Error, root.State, root.Error)
	}
	if got := readyNodes(nodes); len(got) != 0 {
		t.Errorf("ready %v after the failure", got)
	}
}
