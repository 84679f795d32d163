package spec

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Stage is one step of a job with stages (docs/spec.md, "stages"): a flat
// job of its own, whose tasks may wait for the tasks of upstream stages and
// see their outputs.
type Stage struct {
	// Job is the stage as a flat job: Name is the stage's name, Output is
	// OUTPUT/stages/<name>, and plugin, params, tasks, inputs, timeout,
	// retries, verify, resources and batch are the stage's own over the
	// job's (params merged, inputs the job's then the stage's).
	Job   *Job
	Needs []Need
	Pos   Pos // of the stage's entry
}

// Name is the stage's name.
func (s *Stage) Name() string { return s.Job.Name }

// Edge kinds of a need.
const (
	EdgeAll   = "all"   // every downstream task waits for every upstream task
	EdgeEach  = "each"  // task n waits for task n upstream
	EdgeGroup = "group" // task n waits for upstream tasks n*Group to n*Group+Group-1
)

// Failure policies of a job with stages (on_failure).
const (
	OnFailureStop     = "stop"     // a stage with a failed task ends the job: nothing more starts
	OnFailureContinue = "continue" // everything not downstream of a failure still runs
)

// Need is an edge: the stage that has it waits for tasks of Stage.
type Need struct {
	Stage string // the upstream stage's name
	Index int    // the upstream stage's index in Job.Stages
	Kind  string // EdgeAll, EdgeEach or EdgeGroup
	Group int    // tasks per group (EdgeGroup)
	Pos   Pos
}

// Upstream is the range [lo, hi) of upstream task indexes (of upstream
// tasks in all) that downstream task i waits for and sees.
func (n Need) Upstream(i, upstream int) (lo, hi int) {
	switch n.Kind {
	case EdgeEach:
		return i, i + 1
	case EdgeGroup:
		return i * n.Group, min(upstream, (i+1)*n.Group)
	}
	return 0, upstream
}

var (
	stageKeys = []string{"name", "plugin", "params", "tasks", "inputs", "timeout", "retries", "verify", "resources", "batch", "needs"}
	needKeys  = []string{"stage", "edge", "group"}
)

// stagedJob reads a job with stages: the job's own fields are defaults for
// every stage.
func (p *parser) stagedJob(f fieldSet, e pair, j *Job) {
	for _, k := range []string{"plugin", "tasks", "reduce"} {
		if o, ok := f[k]; ok {
			hint := "each stage names its own"
			if k == "reduce" {
				hint = "write a last stage that needs the others"
			}
			p.errorf(o.k, "%s: not allowed in a job with stages (%s)", k, hint)
		}
	}
	j.OnFailure = OnFailureStop
	if o, ok := f.given("on_failure"); ok {
		if s, ok := p.str(o.v, "on_failure"); ok {
			if s == OnFailureStop || s == OnFailureContinue {
				j.OnFailure = s
			} else {
				p.errorf(o.v, "on_failure: must be %q or %q, got %s", OnFailureStop, OnFailureContinue, short(s))
			}
		}
	}
	p.body(e.k, f, j, false)
	list := deref(e.v)
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		p.errorf(e.v, "stages: expected a non-empty list of stages, got %s", describeList(e.v))
		return
	}
	before := p.adds
	for _, item := range list.Content {
		if st := p.stage(item, j); st != nil {
			j.Stages = append(j.Stages, st)
		}
	}
	if p.adds != before {
		return
	}
	p.checkGraph(j)
}

// stage reads one entry of stages over the job's defaults.
func (p *parser) stage(item *yaml.Node, j *Job) *Stage {
	f := p.fields(item, "stage", stageKeys...)
	if f == nil {
		return nil
	}
	sj := *j
	sj.Stages, sj.OnFailure, sj.order = nil, "", nil
	st := &Stage{Job: &sj, Pos: Pos{max(item.Line, 1), max(item.Column, 1)}}
	e, ok := f["name"]
	if !ok {
		p.errorf(item, "stage: missing required key \"name\"")
		return nil
	}
	s, ok := p.str(e.v, "stage name")
	if !ok {
		return nil
	}
	if !validToken(s, 64) {
		p.errorf(e.v, "stage name: %s is not a valid name (1 to 64 of A-Z a-z 0-9 . _ -, not . or ..)", short(s))
		return nil
	}
	sj.Name = s
	sj.Output = filepath.Join(j.Output, "stages", s)
	p.body(item, f, &sj, true)
	if e, ok := f.given("needs"); ok {
		st.Needs = p.needs(e.v)
	}
	return st
}

// needs reads a stage's needs: names (edge all) or {stage, edge, group}.
func (p *parser) needs(n *yaml.Node) []Need {
	list := deref(n)
	if list.Kind != yaml.SequenceNode {
		p.errorf(n, "needs: expected a list of stage names or {stage, edge, group} mappings, got %s", describe(n))
		return nil
	}
	var out []Need
	for _, item := range list.Content {
		nd := Need{Kind: EdgeAll, Pos: Pos{max(item.Line, 1), max(item.Column, 1)}}
		switch deref(item).Kind {
		case yaml.ScalarNode:
			s, ok := p.str(item, "needs")
			if !ok {
				continue
			}
			nd.Stage = s
		case yaml.MappingNode:
			f := p.fields(item, "need", needKeys...)
			e, ok := f["stage"]
			if !ok {
				p.errorf(item, "need: missing required key \"stage\"")
				continue
			}
			if nd.Stage, ok = p.str(e.v, "need stage"); !ok {
				continue
			}
			edge, hasEdge := f.given("edge")
			if hasEdge {
				if s, ok := p.str(edge.v, "need edge"); ok {
					if s == EdgeAll || s == EdgeEach {
						nd.Kind = s
					} else {
						p.errorf(edge.v, "need edge: must be %q or %q (or give group: N), got %s", EdgeAll, EdgeEach, short(s))
					}
				}
			}
			if g, ok := f.given("group"); ok {
				if hasEdge {
					p.errorf(g.k, "need: give edge or group, not both")
				} else if v, ok := p.integer(g.v, "need group", 1, MaxTasks); ok {
					nd.Kind, nd.Group = EdgeGroup, int(v)
				}
			}
		default:
			p.errorf(item, "needs: expected a stage name or a {stage, edge, group} mapping, got %s", describe(item))
			continue
		}
		out = append(out, nd)
	}
	return out
}

// checkGraph checks the stages as a graph: unique names, known upstream
// stages, no cycle, sizes that fit each and group edges, the task limit;
// it sets j.order.
func (p *parser) checkGraph(j *Job) {
	index := make(map[string]int, len(j.Stages))
	total := 0
	for i, st := range j.Stages {
		if prev, dup := index[st.Name()]; dup {
			p.add(st.Pos.Line, st.Pos.Col, "duplicate stage name %s (first used at %s)", short(st.Name()), j.Stages[prev].Pos)
			continue
		}
		index[st.Name()] = i
		total += st.Job.Tasks.Len()
	}
	if uint64(total) > p.limits.tasks {
		p.add(j.Stages[0].Pos.Line, j.Stages[0].Pos.Col, "the stages have %d tasks together, more than the limit of %d", total, p.limits.tasks)
	}
	for _, st := range j.Stages {
		seen := map[string]bool{}
		for k := range st.Needs {
			nd := &st.Needs[k]
			up, ok := index[nd.Stage]
			switch {
			case !ok:
				p.add(nd.Pos.Line, nd.Pos.Col, "needs: unknown stage %s (stages: %s)", short(nd.Stage), stageNames(j))
				continue
			case nd.Stage == st.Name():
				p.add(nd.Pos.Line, nd.Pos.Col, "needs: stage %s cannot need itself", short(nd.Stage))
				continue
			case seen[nd.Stage]:
				p.add(nd.Pos.Line, nd.Pos.Col, "needs: stage %s is named twice", short(nd.Stage))
				continue
			}
			seen[nd.Stage] = true
			nd.Index = up
			down, upN := st.Job.Tasks.Len(), j.Stages[up].Job.Tasks.Len()
			switch nd.Kind {
			case EdgeEach:
				if down != upN {
					p.add(nd.Pos.Line, nd.Pos.Col, "needs: edge each between stages of different sizes: %s has %d tasks, %s has %d", short(st.Name()), down, short(nd.Stage), upN)
				}
			case EdgeGroup:
				if want := (upN + nd.Group - 1) / nd.Group; down != want {
					p.add(nd.Pos.Line, nd.Pos.Col, "needs: group %d over the %d tasks of %s makes %d groups, but %s has %d tasks", nd.Group, upN, short(nd.Stage), want, short(st.Name()), down)
				}
			}
		}
	}
	if p.adds == 0 {
		p.order(j)
	}
}

func stageNames(j *Job) string {
	names := make([]string, len(j.Stages))
	for i, st := range j.Stages {
		names[i] = st.Name()
	}
	return strings.Join(names, ", ")
}

// order sorts the stages topologically (a stage after those it needs,
// else in spec order) into j.order, or reports a cycle at the need that
// closes it.
func (p *parser) order(j *Job) {
	const (
		unseen = iota
		open
		closed
	)
	state := make([]int, len(j.Stages))
	var path []int
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		path = append(path, i)
		for _, nd := range j.Stages[i].Needs {
			switch state[nd.Index] {
			case open:
				names := []string{}
				for k := len(path) - 1; k >= 0; k-- {
					names = append(names, j.Stages[path[k]].Name())
					if path[k] == nd.Index {
						break
					}
				}
				names = append([]string{j.Stages[nd.Index].Name()}, names...)
				p.add(nd.Pos.Line, nd.Pos.Col, "needs: cycle: %s", strings.Join(names, " needs "))
				return false
			case unseen:
				if !visit(nd.Index) {
					return false
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = closed
		j.order = append(j.order, i)
		return true
	}
	for i := range j.Stages {
		if state[i] == unseen && !visit(i) {
			j.order = nil
			return
		}
	}
}

// StageOrder is the stages' indexes in an order that puts every stage
// after the stages it needs (nil for a flat job).
func (j *Job) StageOrder() []int { return j.order }

// TaskCount is the job's number of tasks: of all its stages together for a
// job with stages.
func (j *Job) TaskCount() int {
	if len(j.Stages) == 0 {
		return j.Tasks.Len()
	}
	n := 0
	for _, st := range j.Stages {
		n += st.Job.Tasks.Len()
	}
	return n
}

// String describes the edge as the spec writes it.
func (n Need) String() string {
	switch n.Kind {
	case EdgeGroup:
		return fmt.Sprintf("%s (group %d)", n.Stage, n.Group)
	case EdgeEach:
		return n.Stage + " (each)"
	}
	return n.Stage
}
