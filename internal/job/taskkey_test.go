package job

import (
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/spec"
)

// keysOf parses a spec (its plugin line and tasks added) and gives its
// tasks' keys by ID, for the plugin and inputs given.
func keysOf(t *testing.T, body string, plugin digest.ID, inputs []Input) map[string][32]byte {
	t.Helper()
	job, err := spec.Parse("job.yaml", []byte("plugin: ./p\n"+body), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := NewKeyBase(plugin, inputs, job.Sandbox)
	keys := map[string][32]byte{}
	for i := range job.Tasks.Len() {
		keys[job.Tasks.ID(i)] = base.Task(job.Tasks.ID(i), job.TaskParamsJSON(i))
	}
	return keys
}

// TestTaskKey: a task's key changes with what changes its output (the
// plugin, its ID, its effective params, an input's name or content, the
// sandbox's network) and with nothing else (timeout, retries, verify,
// resources, batch, the job's name, the other tasks, the order of the
// params in the spec).
func TestTaskKey(t *testing.T) {
	plugin := digest.Sum([]byte("plugin"))
	in := []Input{{Name: "a.txt", Digest: digest.Sum([]byte("a"))}}
	const tasks = "tasks:\n  - {id: one, params: {v: 1, w: x}}\n  - {id: two, params: {v: 2}}\n"
	base := keysOf(t, "name: j\nparams: {g: 1}\n"+tasks, plugin, in)
	if len(base) != 2 || base["one"] == base["two"] || base["one"] == ([32]byte{}) {
		t.Fatalf("keys %x", base)
	}
	same := map[string]string{
		"timeout, retries, verify, resources, batch": "name: j\nparams: {g: 1}\ntimeout: 5m\nretries: 7\nverify: {replicas: 2}\nresources: {memory: 1GB}\nbatch: off\n" + tasks,
		"the job's name":        "name: other\nparams: {g: 1}\n" + tasks,
		"another task added":    "name: j\nparams: {g: 1}\n" + tasks + "  - {id: three}\n",
		"order in the spec":     "name: j\nparams: {g: 1}\ntasks:\n  - {id: two, params: {v: 2}}\n  - {id: one, params: {w: x, v: 1}}\n",
		"params moved to tasks": "name: j\ntasks:\n  - {id: one, params: {v: 1, w: x, g: 1}}\n  - {id: two, params: {g: 1, v: 2}}\n",
	}
	for what, body := range same {
		keys := keysOf(t, body, plugin, in)
		if keys["one"] != base["one"] || keys["two"] != base["two"] {
			t.Errorf("%s changed a key", what)
		}
	}
	changed := []struct {
		what, body string
		plugin     digest.ID
		inputs     []Input
		want       string // the task whose key changes; "" for both
	}{
		{"the plugin", "name: j\nparams: {g: 1}\n" + tasks, digest.Sum([]byte("plugin 2")), in, ""},
		{"an input's content", "name: j\nparams: {g: 1}\n" + tasks, plugin, []Input{{Name: "a.txt", Digest: digest.Sum([]byte("b"))}}, ""},
		{"an input's name", "name: j\nparams: {g: 1}\n" + tasks, plugin, []Input{{Name: "b.txt", Digest: in[0].Digest}}, ""},
		{"an input added", "name: j\nparams: {g: 1}\n" + tasks, plugin, append([]Input{{Name: "c", Digest: in[0].Digest}}, in...), ""},
		{"the network", "name: j\nparams: {g: 1}\nsandbox: {network: true}\n" + tasks, plugin, in, ""},
		{"a job param", "name: j\nparams: {g: 2}\n" + tasks, plugin, in, ""},
		{"one task's param", "name: j\nparams: {g: 1}\n" + strings.Replace(tasks, "v: 2", "v: 3", 1), plugin, in, "two"},
		{"one task's ID", "name: j\nparams: {g: 1}\n" + strings.Replace(tasks, "id: one", "id: uno", 1), plugin, in, "one"},
	}
	for _, c := range changed {
		keys := keysOf(t, c.body, c.plugin, c.inputs)
		for _, id := range []string{"one", "two"} {
			if moved := keys[id] != base[id]; moved != (c.want == "" || c.want == id) {
				t.Errorf("%s: task %s's key changed: %v", c.what, id, moved)
			}
		}
		if c.want == "one" && keys["uno"] == base["one"] {
			t.Errorf("%s: a renamed task kept its key", c.what)
		}
	}
}
