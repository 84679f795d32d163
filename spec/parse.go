package spec

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// This file gives meaning to the node tree: the job's fields, task
// generators and their expansion, inputs, defaults.

type parser struct {
	errorSink
	dir        string // absolute
	limits     limits
	paramBytes uint64 // what checkParamBytes counted, for tests
}

// limits are MaxTasks and MaxParamBytes, lowered by the fuzz tests so that
// they spend their time on variety rather than on building huge jobs.
type limits struct {
	tasks, paramBytes uint64
}

var defaultLimits = limits{tasks: MaxTasks, paramBytes: MaxParamBytes}

var (
	jobKeys       = []string{"name", "plugin", "params", "tasks", "inputs", "output", "reduce", "timeout", "retries", "verify", "resources", "sandbox", "batch", "stages", "on_failure", "spawn"}
	entryKeys     = []string{"id", "params", "range", "grid"}
	rangeKeys     = []string{"param", "from", "to", "step"}
	inputKeys     = []string{"name", "path"}
	verifyKeys    = []string{"replicas", "quorum", "max_replicas", "trust", "spot_check", "distinct_hosts"}
	resourcesKeys = []string{"cpus", "memory", "os", "arch", "gpus"}
	sandboxKeys   = []string{"network"}
	batchKeys     = []string{"max"}
	spawnKeys     = []string{"max_depth", "max_children"}
)

// job reads the top-level mapping.
func (p *parser) job(root *yaml.Node) *Job {
	if deref(root).Kind != yaml.MappingNode {
		p.errorf(root, "a spec must be a mapping with at least plugin and tasks, got %s", describe(root))
		return nil
	}
	f := p.fields(root, "job spec", jobKeys...)
	j := &Job{
		Dir:     p.dir,
		Params:  map[string]any{},
		Timeout: DefaultTimeout,
		Retries: DefaultRetries,
		Verify:  Verify{Replicas: 1, Quorum: 1, MaxReplicas: 2, Trust: TrustOff, DistinctHosts: true},
	}
	j.Name = defaultName(p.file)
	if e, ok := f.given("name"); ok {
		if s, ok := p.str(e.v, "name"); ok {
			if validToken(s, 64) {
				j.Name = s
			} else {
				p.errorf(e.v, "name: %s is not a valid job name (1 to 64 of A-Z a-z 0-9 . _ -, not . or ..)", short(s))
			}
		}
	}
	j.Output = filepath.Join(p.dir, "out", j.Name)
	if e, ok := f.given("output"); ok {
		if s, ok := p.path(e.v, "output"); ok {
			j.Output = p.resolve(s)
		}
	}
	if e, ok := f.given("sandbox"); ok {
		sf := p.fields(e.v, "sandbox", sandboxKeys...)
		if e, ok := sf.given("network"); ok {
			j.Sandbox.Network, _ = p.boolean(e.v, "sandbox.network")
		}
	}
	if e, ok := f["stages"]; ok {
		if e, ok := f["spawn"]; ok {
			p.errorf(e.k, "spawn: a job with stages has none (tasks spawn only in a job without stages)")
		}
		p.stagedJob(f, e, j)
		return j
	}
	if e, ok := f["on_failure"]; ok {
		p.errorf(e.k, "on_failure: only a job with stages has it")
	}
	if e, ok := f.given("reduce"); ok {
		j.Reduce, _ = p.boolean(e.v, "reduce")
	}
	if e, ok := f["spawn"]; ok {
		j.Spawn = p.spawn(e.v)
		if r, ok := f.given("reduce"); ok && j.Reduce {
			p.errorf(r.k, "reduce: a job whose tasks spawn has none (its root tasks' results are the job's)")
		}
	}
	p.body(root, f, j, true)
	return j
}

// body reads what a flat job and a stage share: plugin, params, inputs,
// timeout, retries, verify, resources, batch and tasks, over the
// defaults in j. With flat false (a staged job's own fields, defaults
// for its stages) plugin and tasks are not read.
func (p *parser) body(n *yaml.Node, f fieldSet, j *Job, flat bool) {
	required := func(key string) (pair, bool) {
		e, ok := f[key]
		if !ok {
			p.errorf(n, "missing required key %q", key)
		}
		return e, ok
	}
	if flat {
		if e, ok := required("plugin"); ok {
			if deref(e.v).Kind == yaml.MappingNode {
				j.PluginPos = Pos{max(e.v.Line, 1), max(e.v.Column, 1)}
				p.pluginMap(e.v, j)
			} else if s, ok := p.path(e.v, "plugin"); ok {
				j.Plugin, j.PluginPath = s, p.resolve(s)
				j.PluginPos = Pos{max(e.v.Line, 1), max(e.v.Column, 1)}
			}
		}
	}
	if e, ok := f.given("params"); ok {
		own := p.params(e.v, "params")
		if len(j.Params) == 0 {
			j.Params = own
		} else {
			merged := make(map[string]any, len(j.Params)+len(own))
			for k, v := range j.Params {
				merged[k] = v
			}
			for k, v := range own {
				merged[k] = v
			}
			j.Params = merged
		}
	}
	if e, ok := f.given("inputs"); ok {
		own := p.inputs(e.v)
		for _, in := range own {
			for _, prev := range j.Inputs {
				if prev.Name == in.Name {
					p.add(in.Pos.Line, in.Pos.Col, "duplicate input name %s (the job's inputs, which every stage sees, have it at %s)", short(in.Name), prev.Pos)
				}
			}
		}
		j.Inputs = append(j.Inputs[:len(j.Inputs):len(j.Inputs)], own...)
	}
	if e, ok := f.given("timeout"); ok {
		if d, ok := p.duration(e.v, "timeout", MaxTimeout); ok {
			j.Timeout = d
		}
	}
	if e, ok := f.given("retries"); ok {
		if n, ok := p.integer(e.v, "retries", 0, MaxRetries); ok {
			j.Retries = int(n)
		}
	}
	if e, ok := f.given("verify"); ok {
		j.Verify = p.verify(e.v)
	}
	if e, ok := f.given("resources"); ok {
		j.Resources = p.resources(e.v)
	}
	if e, ok := f.given("batch"); ok {
		j.Batch = p.batch(e.v)
	}
	if flat {
		if e, ok := required("tasks"); ok {
			j.Tasks = p.tasks(e.v, j.Params)
		}
	}
}

// batch reads "batch: off" or "batch: {max: N}" (docs/spec.md, "batch").
func (p *parser) batch(n *yaml.Node) int {
	if t := deref(n); t.Kind == yaml.ScalarNode {
		if t.ShortTag() == "!!str" && t.Value == "off" {
			return 1
		}
		p.errorf(n, "batch: expected off or {max: N}, got %s", describe(n))
		return 0
	}
	bf := p.fields(n, "batch", batchKeys...)
	if e, ok := bf.given("max"); ok {
		if v, ok := p.integer(e.v, "batch.max", 1, MaxBatch); ok {
			return int(v)
		}
	}
	return 0
}

// spawn reads "spawn: {max_depth: D, max_children: C}" (docs/spec.md,
// "spawn"); "spawn: {}" takes the defaults.
func (p *parser) spawn(n *yaml.Node) *Spawn {
	s := &Spawn{MaxDepth: DefaultSpawnDepth, MaxChildren: DefaultSpawnChildren}
	if t := deref(n); t.Kind == yaml.ScalarNode && t.ShortTag() == "!!null" {
		return s
	}
	if deref(n).Kind != yaml.MappingNode {
		p.errorf(n, "spawn: expected {max_depth: D, max_children: C}, got %s", describe(n))
		return s
	}
	sf := p.fields(n, "spawn", spawnKeys...)
	if e, ok := sf.given("max_depth"); ok {
		if v, ok := p.integer(e.v, "spawn.max_depth", 1, MaxSpawnDepth); ok {
			s.MaxDepth = int(v)
		}
	}
	if e, ok := sf.given("max_children"); ok {
		if v, ok := p.integer(e.v, "spawn.max_children", 1, MaxSpawnChildren); ok {
			s.MaxChildren = int(v)
		}
	}
	return s
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// validToken is true for 1 to max of [A-Za-z0-9._-], except "." and "..":
// names and ids may end up as file names.
func validToken(s string, max int) bool {
	return len(s) >= 1 && len(s) <= max && s != "." && s != ".." && tokenRE.MatchString(s)
}

// defaultName derives the job name from the spec file name: its base name
// without extension, with characters outside [A-Za-z0-9._-] replaced by
// "-" and cut to 64 bytes; "job" if nothing usable is left.
func defaultName(file string) string {
	base := file[strings.LastIndexAny(file, `/\`)+1:]
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	var b strings.Builder
	for _, r := range base {
		if r < 128 && tokenRE.MatchString(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() == 64 {
			break
		}
	}
	if name := b.String(); validToken(name, 64) {
		return name
	}
	return "job"
}

// path reads a file system path: a non-empty string without NUL.
func (p *parser) path(n *yaml.Node, label string) (string, bool) {
	s, ok := p.str(n, label)
	switch {
	case !ok:
		return "", false
	case s == "":
		p.errorf(n, "%s: path must not be empty", label)
		return "", false
	case strings.IndexByte(s, 0) >= 0:
		p.errorf(n, "%s: path must not contain a NUL character", label)
		return "", false
	}
	return s, true
}

// resolve makes a path from the spec absolute. Paths are written with "/"
// on every platform.
func (p *parser) resolve(s string) string {
	s = filepath.FromSlash(s)
	if filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return filepath.Join(p.dir, s)
}

// params reads a params mapping.
func (p *parser) params(n *yaml.Node, label string) map[string]any {
	if isNull(n) {
		return map[string]any{}
	}
	if deref(n).Kind != yaml.MappingNode {
		p.errorf(n, "%s: expected a mapping of param names to values, got %s", label, describe(n))
		return map[string]any{}
	}
	m, _ := p.mapping(n)
	return m
}

func (p *parser) duration(n *yaml.Node, label string, limit time.Duration) (time.Duration, bool) {
	t := deref(n)
	if t.Kind != yaml.ScalarNode || t.ShortTag() != "!!str" {
		p.errorf(n, "%s: expected a duration like 30s, got %s", label, describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(t.Value))
	if err != nil {
		p.errorf(n, "%s: invalid duration %s (use a Go duration like 30s, 5m or 1h30m)", label, short(t.Value))
		return 0, false
	}
	if d <= 0 || d > limit {
		p.errorf(n, "%s: must be more than 0s and at most %s, got %s", label, shortDuration(limit), d)
		return 0, false
	}
	return d, true
}

// shortDuration prints 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

func (p *parser) verify(n *yaml.Node) Verify {
	v := Verify{Replicas: 1, Trust: TrustOff, DistinctHosts: true}
	f := p.fields(n, "verify", verifyKeys...)
	if e, ok := f.given("distinct_hosts"); ok {
		if b, ok := p.boolean(e.v, "verify.distinct_hosts"); ok {
			v.DistinctHosts = b
		}
	}
	replicasOK := true // if not, comparisons with it would only mislead
	if e, ok := f.given("replicas"); ok {
		var x int64
		if x, replicasOK = p.integer(e.v, "verify.replicas", 1, MaxReplicas); replicasOK {
			v.Replicas = int(x)
		}
	}
	v.Quorum = v.Replicas
	if e, ok := f.given("quorum"); ok {
		if x, ok := p.integer(e.v, "verify.quorum", 1, math.MaxInt64); ok {
			if x > int64(v.Replicas) && replicasOK {
				p.errorf(e.v, "verify.quorum: must not exceed verify.replicas (%d), got %d", v.Replicas, x)
			} else {
				v.Quorum = int(x)
			}
		}
	}
	v.MaxReplicas = 2 * v.Replicas
	if e, ok := f.given("max_replicas"); ok {
		if x, ok := p.integer(e.v, "verify.max_replicas", 1, 2*MaxReplicas); ok {
			if x < int64(v.Replicas) && replicasOK {
				p.errorf(e.v, "verify.max_replicas: must be at least verify.replicas (%d), got %d", v.Replicas, x)
			} else {
				v.MaxReplicas = int(x)
			}
		}
	}
	if e, ok := f.given("trust"); ok {
		if s, ok := p.str(e.v, "verify.trust"); ok {
			if s == TrustOff || s == TrustAdaptive {
				v.Trust = s
			} else {
				p.errorf(e.v, "verify.trust: must be %q or %q, got %s", TrustOff, TrustAdaptive, short(s))
			}
		}
	}
	if e, ok := f.given("spot_check"); ok {
		if x, ok := p.number(e.v, "verify.spot_check"); ok {
			if x >= 0 && x <= 1 {
				v.SpotCheck = x
			} else {
				p.errorf(e.v, "verify.spot_check: must be a fraction from 0 to 1, got %v", x)
			}
		}
	}
	return v
}

var platformRE = regexp.MustCompile(`^[a-z0-9]{1,32}$`)

func (p *parser) resources(n *yaml.Node) Resources {
	var r Resources
	f := p.fields(n, "resources", resourcesKeys...)
	if e, ok := f.given("cpus"); ok {
		if x, ok := p.number(e.v, "resources.cpus"); ok {
			if x > 0 {
				r.CPUs = x
			} else {
				p.errorf(e.v, "resources.cpus: must be more than 0, got %v", x)
			}
		}
	}
	if e, ok := f.given("memory"); ok {
		r.Memory = p.memory(e.v)
	}
	if e, ok := f.given("gpus"); ok {
		if x, ok := p.integer(e.v, "resources.gpus", 0, MaxTaskGPUs); ok {
			r.GPUs = int(x)
		}
	}
	for _, k := range []struct {
		key string
		dst *string
	}{{"os", &r.OS}, {"arch", &r.Arch}} {
		if e, ok := f.given(k.key); ok {
			if s, ok := p.str(e.v, "resources."+k.key); ok {
				if platformRE.MatchString(s) {
					*k.dst = s
				} else {
					p.errorf(e.v, "resources.%s: %s is not a Go %s name (like %s)", k.key, short(s),
						map[string]string{"os": "GOOS", "arch": "GOARCH"}[k.key],
						map[string]string{"os": "linux", "arch": "amd64"}[k.key])
				}
			}
		}
	}
	return r
}

// memory reads a size: an integer number of bytes or a string such as
// "512MiB", "1.5GiB" or "2GB".
func (p *parser) memory(n *yaml.Node) int64 {
	const label = "resources.memory"
	t := deref(n)
	if t.Kind == yaml.ScalarNode && t.ShortTag() == "!!int" {
		x, _ := p.integer(n, label, 1, math.MaxInt64)
		return x
	}
	if t.Kind != yaml.ScalarNode || t.ShortTag() != "!!str" {
		p.errorf(n, "%s: expected a size like 512MiB, got %s", label, describe(n))
		return 0
	}
	bytes, err := ParseSize(t.Value)
	switch {
	case errors.Is(err, ErrSizeSyntax):
		p.errorf(n, "%s: invalid size %s (use a number with B, kB, MB, GB, TB, KiB, MiB, GiB or TiB, like 512MiB)", label, short(t.Value))
		return 0
	case err != nil || bytes == 0:
		p.errorf(n, "%s: size %s must be at least 1 byte and fit in 64 bits", label, short(t.Value))
		return 0
	}
	return bytes
}

// inputs reads the inputs list.
func (p *parser) inputs(n *yaml.Node) []Input {
	list := deref(n)
	if list.Kind != yaml.SequenceNode {
		p.errorf(n, "inputs: expected a list of paths or {name, path} mappings, got %s", describe(n))
		return nil
	}
	var out []Input
	first := make(map[string]Pos)
	for _, item := range list.Content {
		var name, path string
		var nameNode *yaml.Node
		switch deref(item).Kind {
		case yaml.ScalarNode:
			s, ok := p.path(item, "inputs")
			if !ok {
				continue
			}
			path = s
		case yaml.MappingNode:
			f := p.fields(item, "input", inputKeys...)
			e, ok := f["path"]
			if !ok {
				p.errorf(item, "input: missing required key \"path\"")
				continue
			}
			if path, ok = p.path(e.v, "input path"); !ok {
				continue
			}
			if e, ok := f.given("name"); ok {
				if name, ok = p.str(e.v, "input name"); !ok {
					continue
				}
				nameNode = e.v
			}
		default:
			p.errorf(item, "inputs: expected a path or a {name, path} mapping, got %s", describe(item))
			continue
		}
		if nameNode == nil {
			name = baseName(path)
			if !validInputName(name) {
				p.errorf(item, "inputs: cannot derive an input name from path %s; give one with {name: ..., path: ...}", short(path))
				continue
			}
		} else if !validInputName(name) {
			p.errorf(nameNode, "input name: %s is not a valid file name (no / or \\ or NUL, not . or .., at most 255 bytes)", short(name))
			continue
		}
		pos := Pos{max(item.Line, 1), max(item.Column, 1)}
		if prev, dup := first[name]; dup {
			p.errorf(item, "duplicate input name %s (first used at %s)", short(name), prev)
			continue
		}
		first[name] = pos
		out = append(out, Input{Name: name, Path: p.resolve(path), Pos: pos})
	}
	return out
}

// baseName is the last element of a path written with / or \.
func baseName(path string) string {
	path = strings.TrimRight(path, `/\`)
	return path[strings.LastIndexAny(path, `/\`)+1:]
}

// validInputName accepts a single file name that is the same on every
// platform (no / or \ at all) and local to the task's directory.
func validInputName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 255 &&
		!strings.ContainsAny(s, "/\\\x00") && filepath.IsLocal(s)
}

// entry is one item of the tasks list before expansion.
type entry struct {
	node   *yaml.Node // the item as written
	kind   string     // "task", "range" or "grid"
	genKey *yaml.Node // the range or grid key, for messages
	id     string     // explicit id ("" if none)
	params map[string]any
	// range
	param      string
	from, step int64
	// grid
	axes []axis

	count uint64
}

type axis struct {
	key    string
	values []any
}

// tasks reads the tasks list and expands it.
func (p *parser) tasks(n *yaml.Node, jobParams map[string]any) Tasks {
	list := deref(n)
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		p.errorf(n, "tasks: expected a non-empty list of task entries, got %s", describeList(n))
		return Tasks{}
	}
	before := p.adds
	entries := make([]*entry, 0, len(list.Content))
	for _, item := range list.Content {
		if e := p.entry(item); e != nil {
			entries = append(entries, e)
		}
	}
	if p.adds != before {
		return Tasks{}
	}
	// Count before building anything.
	var total uint64
	for _, e := range entries {
		if e.count == math.MaxUint64 {
			p.errorf(e.genKey, "%s expands to far more tasks than the limit of %d", e.title(), p.limits.tasks)
			return Tasks{}
		}
		if e.count > p.limits.tasks {
			p.errorf(e.genKey, "%s expands to %d tasks, more than the limit of %d", e.title(), e.count, p.limits.tasks)
			return Tasks{}
		}
		total += e.count // both at most MaxTasks: no overflow
		if total > p.limits.tasks {
			p.errorf(e.genKey, "%s brings the job to %d tasks, more than the limit of %d", e.title(), total, p.limits.tasks)
			return Tasks{}
		}
	}
	if !p.checkParamBytes(entries, jobParams) {
		return Tasks{}
	}
	width := max(4, len(strconv.FormatUint(total-1, 10)))
	tasks := Tasks{segs: make([]segment, 0, len(entries)), n: int(total)}
	start := 0
	for _, e := range entries {
		tasks.segs = append(tasks.segs, e.segment(start, jobParams, width))
		start += int(e.count)
	}
	for _, d := range tasks.duplicates() {
		p.add(d.pos.Line, d.pos.Col, "duplicate task id %q (first used by the task at %s)", d.id, d.first)
		if p.full {
			break
		}
	}
	return tasks
}

// checkParamBytes enforces MaxParamBytes before any task is built: every
// task carries a copy of the job's params, so a large value in them times a
// large range would otherwise cost the product in JSON (job ID, transfer to
// peers). The count is exact, and cannot overflow: at most MaxTasks tasks
// of a few megabytes each.
func (p *parser) checkParamBytes(entries []*entry, jobParams map[string]any) bool {
	// A params object is "{" + members joined by "," + "}", a member being
	// key + ":" + value. Sizes below are of members.
	jobSizes := make(map[string]uint64, len(jobParams))
	var jobSum uint64
	for k, v := range jobParams {
		jobSizes[k] = member(k, v)
		jobSum += jobSizes[k]
	}
	object := func(sum, n uint64) uint64 { // size of an object of n members
		if n == 0 {
			return 2
		}
		return 2 + sum + n - 1
	}
	total := p.paramBytes // the stages before: the limit is the job's
	for _, e := range entries {
		// The params before the generator's values: job's overlaid with
		// the entry's.
		sum, n := jobSum, uint64(len(jobParams))
		for k, v := range e.params {
			if s, ok := jobSizes[k]; ok {
				sum, n = sum-s, n-1
			}
			sum, n = sum+member(k, v), n+1
		}
		switch e.kind {
		case "task":
			total += object(sum, n)
		case "range":
			if s, ok := jobSizes[e.param]; ok { // e.params cannot hold it
				sum, n = sum-s, n-1
			}
			key := uint64(len(encode(e.param))) + 1
			v := e.from
			for range e.count {
				total += object(sum+key+uint64(len(strconv.FormatInt(v, 10))), n+1)
				v += e.step
			}
		case "grid":
			for _, a := range e.axes { // nor these
				if s, ok := jobSizes[a.key]; ok {
					sum, n = sum-s, n-1
				}
			}
			// Braces, base members and all commas; axis members below.
			total += e.count * object(sum, n+uint64(len(e.axes)))
			for _, a := range e.axes {
				var axisSum uint64
				for _, v := range a.values {
					axisSum += member(a.key, v)
				}
				total += e.count / uint64(len(a.values)) * axisSum
			}
		}
		if total > p.limits.paramBytes {
			p.errorf(e.genKey, "%s brings the params of all tasks to %d bytes of JSON, more than the limit of %d (pass large data in an input file)",
				e.title(), total, p.limits.paramBytes)
			return false
		}
	}
	p.paramBytes = total
	return true
}

// member is the size of "key":value in canonical JSON.
func member(k string, v any) uint64 {
	return uint64(len(encode(k)) + 1 + len(encode(v)))
}

func describeList(n *yaml.Node) string {
	if t := deref(n); t.Kind == yaml.SequenceNode {
		return "an empty list"
	}
	return describe(n)
}

// title names a generator in messages.
func (e *entry) title() string {
	switch e.kind {
	case "range":
		return fmt.Sprintf("range over %s", short(e.param))
	case "grid":
		keys := make([]string, len(e.axes))
		for i, a := range e.axes {
			keys[i] = short(a.key).String()
		}
		return "grid over " + strings.Join(keys, ", ")
	}
	return "task"
}

// entry reads one item of the tasks list.
func (p *parser) entry(item *yaml.Node) *entry {
	f := p.fields(item, "task entry", entryKeys...)
	if f == nil {
		return nil
	}
	e := &entry{node: item, kind: "task", genKey: item, count: 1}
	rng, hasRange := f["range"]
	grid, hasGrid := f["grid"]
	if hasRange && hasGrid {
		p.errorf(grid.k, "task entry: range and grid cannot be combined in one entry; use two entries")
		return nil
	}
	if id, ok := f.given("id"); ok {
		if hasRange || hasGrid {
			p.errorf(id.k, "task entry: id is only allowed on explicit tasks; tasks from range and grid get numbered ids")
		} else if s, ok := p.str(id.v, "id"); ok {
			if validToken(s, 128) {
				e.id = s
			} else {
				p.errorf(id.v, "id: %s is not a valid task id (1 to 128 of A-Z a-z 0-9 . _ -, not . or ..)", short(s))
			}
		}
	}
	var paramsNode *yaml.Node
	if pe, ok := f.given("params"); ok {
		paramsNode = pe.v
		e.params = p.params(pe.v, "params")
	}
	switch {
	case hasRange:
		e.kind, e.genKey = "range", rng.k
		p.rangeGen(e, rng.v)
		if _, clash := e.params[e.param]; clash && e.param != "" {
			p.clash(paramsNode, e.param, "range")
		}
	case hasGrid:
		e.kind, e.genKey = "grid", grid.k
		p.gridGen(e, grid.v)
		for _, a := range e.axes {
			if _, clash := e.params[a.key]; clash {
				p.clash(paramsNode, a.key, "grid")
			}
		}
	}
	return e
}

// clash reports a params key that the entry's generator also sets.
func (p *parser) clash(params *yaml.Node, key, gen string) {
	for _, e := range p.pairs(params) {
		if e.key == key {
			p.errorf(e.k, "params: %s is also set by this entry's %s; remove one of them", short(key), gen)
			return
		}
	}
}

func (p *parser) rangeGen(e *entry, n *yaml.Node) {
	f := p.fields(n, "range", rangeKeys...)
	if f == nil {
		return
	}
	var ok [3]bool
	for i, key := range []string{"param", "from", "to"} {
		if _, present := f[key]; !present {
			p.errorf(n, "range: missing required key %q", key)
		} else {
			ok[i] = true
		}
	}
	if ok[0] {
		if e.param, ok[0] = p.str(f["param"].v, "range.param"); ok[0] && e.param == "" {
			p.errorf(f["param"].v, "range.param: must not be empty")
			ok[0] = false
		}
	}
	var to int64
	if ok[1] {
		e.from, ok[1] = p.integer(f["from"].v, "range.from", math.MinInt64, math.MaxInt64)
	}
	if ok[2] {
		to, ok[2] = p.integer(f["to"].v, "range.to", math.MinInt64, math.MaxInt64)
	}
	e.step = 1
	if s, present := f.given("step"); present {
		step, good := p.integer(s.v, "range.step", math.MinInt64, math.MaxInt64)
		if good && step == 0 {
			p.errorf(s.v, "range.step: must not be 0")
			good = false
		}
		if !good {
			return
		}
		e.step = step
	}
	if !ok[0] || !ok[1] || !ok[2] {
		return
	}
	// Count in uint64: to-from may not fit in an int64.
	var dist, stride uint64
	switch {
	case e.step > 0 && to >= e.from:
		dist, stride = uint64(to)-uint64(e.from), uint64(e.step)
	case e.step < 0 && to <= e.from:
		dist, stride = uint64(e.from)-uint64(to), uint64(-(e.step+1))+1
	default:
		hint := "a negative step counts down"
		if e.step < 0 {
			hint = "a positive step counts up"
		}
		p.errorf(n, "range: from %d to %d with step %d gives no values (%s)", e.from, to, e.step, hint)
		return
	}
	e.count = dist / stride
	if e.count < math.MaxUint64 {
		e.count++
	}
}

func (p *parser) gridGen(e *entry, n *yaml.Node) {
	if deref(n).Kind != yaml.MappingNode {
		p.errorf(n, "grid: expected a mapping of param names to lists of values, got %s", describe(n))
		return
	}
	prs := p.pairs(n)
	if len(prs) == 0 {
		p.errorf(n, "grid: needs at least one param")
		return
	}
	e.count = 1
	for _, pr := range prs {
		if pr.key == "" {
			p.errorf(pr.k, "grid: param name must not be empty")
			continue
		}
		list := deref(pr.v)
		if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
			p.errorf(pr.v, "grid.%s: expected a non-empty list of values, got %s", truncate(pr.key), describeList(pr.v))
			continue
		}
		a := axis{key: pr.key, values: make([]any, 0, len(list.Content))}
		for _, item := range list.Content {
			v, _ := p.value(item)
			a.values = append(a.values, v)
		}
		e.axes = append(e.axes, a)
		hi, lo := bits.Mul64(e.count, uint64(len(a.values)))
		if hi != 0 {
			lo = math.MaxUint64
		}
		e.count = lo
	}
}
