package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// fuzzLimits are small enough for a fuzz input to be parsed in milliseconds
// and large enough to let every limit be reached.
var fuzzLimits = limits{tasks: 10000, paramBytes: 1 << 20}

// FuzzParse checks that Parse never panics, returns quickly, and either
// gives a well-formed ErrorList or a consistent Job.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/valid/*.yaml", "testdata/invalid/*.yaml", "testdata/canonical/*.yaml", "testdata/stages/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxSize {
			t.Skip()
		}
		start := time.Now()
		job, err := parseWith("fuzz.yaml", data, "/fuzz", fuzzLimits)
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("Parse took %v", took)
		}
		if err != nil {
			if job != nil {
				t.Error("job and error both returned")
			}
			checkErrorList(t, err)
			return
		}
		if before, after, ok := countedParamBytes(t, data, fuzzLimits); !ok || before != after {
			t.Fatalf("params size: %d bytes counted before expansion, %d after (ok %v)", before, after, ok)
		}
		if len(job.Stages) > 0 {
			checkStaged(t, job)
			return
		}
		checkFlat(t, job)
		if before, after, ok := countedParamBytes(t, data, fuzzLimits); !ok || before != after {
			t.Fatalf("params size: %d bytes counted before expansion, %d after (ok %v)", before, after, ok)
		}
		c := job.Canonical()
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %s", c)
		}
		again, err := parseWith("other.yaml", data, "/elsewhere", fuzzLimits)
		if err != nil {
			t.Fatalf("second parse: %v", err)
		}
		if job.Name == "fuzz" {
			again.Name = "fuzz" // the default name comes from the file name
		}
		if string(again.Canonical()) != string(c) {
			t.Fatalf("canonical form depends on file or directory")
		}
	})
}

// checkStaged checks a valid job with stages: each stage is a valid flat
// job, the order holds every stage after those it needs, and the edges
// fit the stages' sizes.
func checkStaged(t *testing.T, job *Job) {
	t.Helper()
	order := job.StageOrder()
	if len(order) != len(job.Stages) || job.TaskCount() > int(fuzzLimits.tasks) {
		t.Fatalf("order %v of %d stages, %d tasks", order, len(job.Stages), job.TaskCount())
	}
	at := make(map[int]int)
	for k, i := range order {
		at[i] = k
	}
	for i, st := range job.Stages {
		checkFlat(t, st.Job)
		for _, nd := range st.Needs {
			up := job.Stages[nd.Index]
			if up.Name() != nd.Stage || at[nd.Index] >= at[i] {
				t.Fatalf("stage %s needs %s: index %d, order %v", st.Name(), nd.Stage, nd.Index, order)
			}
			n, upN := st.Job.Tasks.Len(), up.Job.Tasks.Len()
			if lo, hi := nd.Upstream(n-1, upN); lo < 0 || hi > upN || lo >= hi {
				t.Fatalf("stage %s: last task needs [%d, %d) of %d", st.Name(), lo, hi, upN)
			}
		}
	}
}

// checkFlat checks a valid flat job.
func checkFlat(t *testing.T, job *Job) {
	t.Helper()
	if job.Tasks.Len() < 1 || uint64(job.Tasks.Len()) > fuzzLimits.tasks {
		t.Fatalf("%d tasks", job.Tasks.Len())
	}
	if job.Params == nil || job.Name == "" || job.PluginPath == "" || job.Output == "" {
		t.Fatalf("incomplete job %+v", job)
	}
	if job.Timeout <= 0 || job.Timeout > MaxTimeout || job.Retries < 0 || job.Retries > MaxRetries {
		t.Fatalf("bad limits %+v", job)
	}
	for _, i := range []int{0, job.Tasks.Len() / 2, job.Tasks.Len() - 1} {
		if got, want := string(job.TaskParamsJSON(i)), string(encode(nonNil(job.Tasks.At(i).Params))); got != want {
			t.Fatalf("task %d: params %s, encoded from its map %s", i, got, want)
		}
	}
	v := job.Verify
	if v.Replicas < 1 || v.Quorum < 1 || v.Quorum > v.Replicas || v.MaxReplicas < v.Replicas {
		t.Fatalf("bad verify %+v", v)
	}
	seen := make(map[string]bool)
	for i := range job.Tasks.Len() {
		tk := job.Tasks.At(i)
		if tk.Params == nil || seen[tk.ID] || tk.Pos.Line < 1 {
			t.Fatalf("bad task %d %+v", i, tk)
		}
		seen[tk.ID] = true
		if !json.Valid(job.TaskParamsJSON(i)) {
			t.Fatalf("task %d params are not JSON", i)
		}
	}
}

// FuzzRoundTrip checks the canonical form against a second spelling of the
// same job: every valid spec is written out again by yaml.v3's encoder, with
// generators replaced by explicit tasks and paths changed, and must give
// the same canonical bytes.
func FuzzRoundTrip(f *testing.F) {
	for _, pattern := range []string{"testdata/valid/*.yaml", "testdata/canonical/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := parseWith("fuzz.yaml", data, "/fuzz", fuzzLimits)
		if err != nil || job.Tasks.Len() > 1000 || len(job.Stages) > 0 {
			return
		}
		again := respell(t, job)
		if again == nil {
			return
		}
		if a, b := job.Canonical(), again.Canonical(); string(a) != string(b) {
			t.Fatalf("canonical forms differ:\n%s\n%s", a, b)
		}
	})
}

// respell writes job as another spec and parses it; nil if the new spelling
// is out of the limits (it can be deeper and larger than the original).
func respell(t *testing.T, job *Job) *Job {
	t.Helper()
	tasks := make([]any, job.Tasks.Len())
	for i := range job.Tasks.Len() {
		tk := job.Tasks.At(i)
		tasks[i] = map[string]any{"id": tk.ID, "params": tk.Params}
	}
	inputs := make([]any, len(job.Inputs))
	for i, in := range job.Inputs {
		inputs[i] = map[string]any{"name": in.Name, "path": "/elsewhere/" + in.Name}
	}
	doc := map[string]any{
		"name":    job.Name,
		"plugin":  "/other/plugin",
		"params":  job.Params,
		"tasks":   tasks,
		"inputs":  inputs,
		"output":  "/other/out",
		"reduce":  job.Reduce,
		"timeout": job.Timeout.String(),
		"retries": job.Retries,
		"verify": map[string]any{
			"replicas": job.Verify.Replicas, "quorum": job.Verify.Quorum,
			"max_replicas": job.Verify.MaxReplicas, "trust": job.Verify.Trust, "spot_check": job.Verify.SpotCheck,
		},
	}
	res := map[string]any{}
	if r := job.Resources; !r.IsZero() {
		if r.CPUs != 0 {
			res["cpus"] = r.CPUs
		}
		if r.Memory != 0 {
			res["memory"] = r.Memory
		}
		if r.OS != "" {
			res["os"] = r.OS
		}
		if r.Arch != "" {
			res["arch"] = r.Arch
		}
		if r.GPUs != 0 {
			res["gpus"] = r.GPUs
		}
		doc["resources"] = res
	}
	if job.Sandbox.Network {
		doc["sandbox"] = map[string]any{"network": true}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if len(out) > MaxSize {
		return nil
	}
	again, err := Parse("again.yaml", out, "/again")
	if err != nil {
		if strings.Contains(err.Error(), "nesting is deeper") {
			return nil
		}
		t.Fatalf("respelled spec does not parse: %v\n%s", err, out)
	}
	return again
}
