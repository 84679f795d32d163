package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"slices"
)

// CanonicalFormat names the layout of Canonical's output; it is the first
// member of the object and changes whenever that layout does.
const CanonicalFormat = "p2pc-job/1"

// The structs below fix the member order of the canonical object: members
// are declared in sorted order, and maps are sorted by encoding/json.
type canonicalJob struct {
	Format    string         `json:"format"`
	Inputs    []string       `json:"inputs"`
	Name      string         `json:"name"`
	Params    map[string]any `json:"params"`
	Reduce    bool           `json:"reduce"`
	Resources canonicalRes   `json:"resources"`
	Retries   int            `json:"retries"`
	// Sandbox is left out when it asks for nothing, so that the IDs of
	// jobs without a sandbox section stay what they were.
	Sandbox   *canonicalSandbox `json:"sandbox,omitempty"`
	Tasks     []canonicalTask   `json:"tasks"`
	TimeoutNS int64             `json:"timeout_ns"`
	Verify    canonicalVerify   `json:"verify"`
}

type canonicalTask struct {
	ID     string         `json:"id"`
	Params map[string]any `json:"params"`
}

type canonicalSandbox struct {
	Network bool `json:"network"`
}

type canonicalRes struct {
	Arch string  `json:"arch"`
	CPUs float64 `json:"cpus"`
	// GPUs is left out when 0, so that the IDs of jobs without GPUs
	// stayed what they were.
	GPUs   int    `json:"gpus,omitempty"`
	Memory int64  `json:"memory"`
	OS     string `json:"os"`
}

type canonicalVerify struct {
	// DistinctHosts is written only when false, so that the IDs of jobs
	// that keep the default did not change when it came.
	DistinctHosts *bool   `json:"distinct_hosts,omitempty"`
	MaxReplicas   int     `json:"max_replicas"`
	Quorum        int     `json:"quorum"`
	Replicas      int     `json:"replicas"`
	SpotCheck     float64 `json:"spot_check,omitempty"`
	Trust         string  `json:"trust"`
}

// Canonical returns the job's meaning as deterministic JSON: no
// whitespace, object members sorted by name, HTML characters not escaped.
// It holds the format tag, name, job params, tasks in order (id and merged
// params), input names (sorted), reduce, timeout in nanoseconds, retries,
// verify and resources. It leaves out where things are (File, Dir, Plugin,
// PluginPath, Output, input paths): two specs that differ only in layout,
// key order, comments, anchors or paths give the same bytes.
//
// The job ID is built on these bytes together with the digests of the
// plugin and of the input files, which this package does not read.
func (j *Job) Canonical() []byte {
	var buf bytes.Buffer
	j.WriteCanonical(&buf)
	return buf.Bytes()
}

// falseOnly is nil for true, else a pointer to false.
func falseOnly(b bool) *bool {
	if b {
		return nil
	}
	return &b
}

// tasksMember is where the tasks go in the canonical object: the members
// after it (timeout_ns, verify) hold no text of the user's, so its last
// occurrence is the one.
const tasksMember = `,"tasks":[],"timeout_ns":`

// WriteCanonical writes Canonical's bytes to w a task at a time, so that
// a million tasks are never in memory as one document. It returns w's
// first error.
func (j *Job) WriteCanonical(w io.Writer) error {
	c := canonicalJob{
		Format:    CanonicalFormat,
		Inputs:    make([]string, len(j.Inputs)),
		Name:      j.Name,
		Params:    nonNil(j.Params),
		Reduce:    j.Reduce,
		Resources: canonicalRes{Arch: j.Resources.Arch, CPUs: j.Resources.CPUs, GPUs: j.Resources.GPUs, Memory: j.Resources.Memory, OS: j.Resources.OS},
		Retries:   j.Retries,
		Sandbox:   canonicalSandboxOf(j.Sandbox),
		Tasks:     []canonicalTask{},
		TimeoutNS: int64(j.Timeout),
		Verify:    canonicalVerify{DistinctHosts: falseOnly(j.Verify.DistinctHosts), MaxReplicas: j.Verify.MaxReplicas, Quorum: j.Verify.Quorum, Replicas: j.Verify.Replicas, SpotCheck: j.Verify.SpotCheck, Trust: j.Verify.Trust},
	}
	for i, in := range j.Inputs {
		c.Inputs[i] = in.Name
	}
	slices.Sort(c.Inputs)
	head := encode(c)
	cut := bytes.LastIndex(head, []byte(tasksMember))
	if cut < 0 {
		panic("spec: canonical encoding: unexpected layout")
	}
	cut += len(`,"tasks":[`)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head[:cut])
	for i := range j.Tasks.Len() {
		if i > 0 {
			bw.WriteByte(',')
		}
		t := j.Tasks.At(i)
		bw.Write(encode(canonicalTask{ID: t.ID, Params: nonNil(t.Params)}))
	}
	bw.Write(head[cut:])
	return bw.Flush()
}

// TaskParamsJSON returns task i's params as a canonical JSON object, the
// form plugins receive. It panics if i is out of range.
func (j *Job) TaskParamsJSON(i int) []byte {
	return j.Tasks.paramsJSON(i)
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// encode writes compact JSON without HTML escaping. Values come from Parse
// (strings, bools, int64, finite float64, nil, lists, string-keyed maps), so
// it cannot fail; a caller who put something else into a Job gets a panic.
func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("spec: canonical encoding: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func canonicalSandboxOf(s Sandbox) *canonicalSandbox {
	if s == (Sandbox{}) {
		return nil
	}
	return &canonicalSandbox{Network: s.Network}
}
