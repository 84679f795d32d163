package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./spec -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./spec -update to accept)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// dump renders a job for golden files, one fact per line, with the
// directory that varies between machines replaced by $DIR.
func dump(t *testing.T, j *Job) []byte {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "file: %s\ndir: %s\nname: %s\n", j.File, j.Dir, j.Name)
	fmt.Fprintf(&b, "plugin: %s -> %s\n", j.Plugin, j.PluginPath)
	fmt.Fprintf(&b, "params: %s\n", encode(j.Params))
	fmt.Fprintf(&b, "output: %s\nreduce: %v\ntimeout: %v\nretries: %d\n", j.Output, j.Reduce, j.Timeout, j.Retries)
	fmt.Fprintf(&b, "verify: %+v\nresources: %+v\n", j.Verify, j.Resources)
	if j.Sandbox != (Sandbox{}) {
		fmt.Fprintf(&b, "sandbox: %+v\n", j.Sandbox)
	}
	if j.Spawn != nil {
		fmt.Fprintf(&b, "spawn: %+v\n", *j.Spawn)
	}
	for _, in := range j.Inputs {
		fmt.Fprintf(&b, "input %s: %s = %s\n", in.Pos, in.Name, in.Path)
	}
	for i := range j.Tasks.Len() {
		tk := j.Tasks.At(i)
		fmt.Fprintf(&b, "task %s: %s %s\n", tk.Pos, tk.ID, j.TaskParamsJSON(i))
	}
	fmt.Fprintf(&b, "canonical: %s\n", j.Canonical())
	if len(j.Stages) > 0 {
		fmt.Fprintf(&b, "on_failure: %s\norder: %v\n", j.OnFailure, j.StageOrder())
	}
	for _, st := range j.Stages {
		fmt.Fprintf(&b, "stage %s: %s\n", st.Pos, st.Name())
		for _, nd := range st.Needs {
			fmt.Fprintf(&b, "  needs %s: %s = stage %d, kind %s\n", nd.Pos, nd, nd.Index, nd.Kind)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(dump(t, st.Job))), "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	s := strings.ReplaceAll(b.String(), j.Dir, "$DIR")
	s = strings.ReplaceAll(s, filepath.Dir(j.Dir), "$DIR/..")
	return []byte(s)
}

func TestValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	// Jobs with stages: kept apart from the fuzz seeds, whose checks are
	// of flat jobs.
	staged, _ := filepath.Glob("testdata/stages/*.yaml")
	files = append(files, staged...)
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			job, err := ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".golden", dump(t, job))
		})
	}
}

func TestInvalid(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			start := time.Now()
			job, err := ParseFile(f)
			if took := time.Since(start); took > 10*time.Second { // hostile files must fail fast
				t.Errorf("took %v", took)
			}
			if err == nil {
				t.Fatalf("no error; job %+v", job)
			}
			checkErrorList(t, err)
			golden(t, strings.TrimSuffix(f, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}

// checkErrorList checks the invariants of a parse error.
func checkErrorList(t testing.TB, err error) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T is not an ErrorList: %v", err, err)
	}
	if len(list) == 0 || len(list) > MaxErrors+1 {
		t.Fatalf("%d errors", len(list))
	}
	for i, e := range list {
		if e.Line < 1 || e.Col < 0 || e.Msg == "" {
			t.Errorf("bad error %#v", e)
		}
		if i > 0 && !(i == MaxErrors && e.Msg == "too many errors") {
			if p := list[i-1]; p.Line > e.Line || p.Line == e.Line && p.Col > e.Col {
				t.Errorf("errors not sorted: %v before %v", p, e)
			}
		}
	}
	var first *Error
	if !errors.As(err, &first) || first != list[0] {
		t.Errorf("errors.As(*Error) did not give the first error")
	}
}

func TestOversize(t *testing.T) {
	data := bytes.Repeat([]byte("# padding\n"), MaxSize/10+1)
	_, err := Parse("big.yaml", data, "")
	var e *Error
	if !errors.As(err, &e) || e.Line != 0 || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("Parse: %v", err)
	}
	if got, want := err.Error(), "big.yaml: spec is 1048580 bytes, larger than the limit of 1048576 bytes"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ParseFile(path)
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("ParseFile: %v", err)
	}
	// Exactly MaxSize is fine.
	ok := append([]byte("plugin: p\ntasks: [{}]\n"), bytes.Repeat([]byte("#"), MaxSize-22)...)
	if _, err := Parse("max.yaml", ok[:MaxSize], ""); err != nil {
		t.Errorf("MaxSize bytes: %v", err)
	}
}

func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "read spec: ") {
		t.Errorf("missing file: %v", err)
	}
	_, err = ParseFile(t.TempDir())
	if err == nil || !strings.HasPrefix(err.Error(), "read spec: ") {
		t.Errorf("directory: %v", err)
	}
}

func TestParseFileDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "My Job (v2).yaml")
	if err := os.WriteFile(path, []byte("plugin: ./p\ntasks: [{}]\ninputs: [in.txt]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if j.File != path || j.Dir != dir {
		t.Errorf("File %q Dir %q", j.File, j.Dir)
	}
	if j.Name != "My-Job--v2-" {
		t.Errorf("default name %q", j.Name)
	}
	if want := filepath.Join(dir, "p"); j.PluginPath != want || j.Plugin != "./p" {
		t.Errorf("plugin %q %q", j.Plugin, j.PluginPath)
	}
	if j.PluginPos != (Pos{1, 9}) {
		t.Errorf("plugin at %s, want 1:9", j.PluginPos)
	}
	if want := filepath.Join(dir, "out", "My-Job--v2-"); j.Output != want {
		t.Errorf("output %q, want %q", j.Output, want)
	}
	if want := filepath.Join(dir, "in.txt"); j.Inputs[0].Path != want {
		t.Errorf("input %q", j.Inputs[0].Path)
	}
}

func TestDefaultName(t *testing.T) {
	for file, want := range map[string]string{
		"":                                 "job",
		"job.yaml":                         "job",
		"a/b/render.yml":                   "render",
		`C:\specs\win.yaml`:                "win",
		"x.spec.yaml":                      "x.spec",
		".yaml":                            "job",
		"..yaml":                           "job",
		"noext":                            "noext",
		"héllo wörld.yaml":                 "h-llo-w-rld",
		"<stdin>":                          "-stdin-",
		strings.Repeat("a", 100) + ".yaml": strings.Repeat("a", 64),
	} {
		if got := defaultName(file); got != want {
			t.Errorf("defaultName(%q) = %q, want %q", file, got, want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{"f.yaml", 3, 5, "bad"}, "f.yaml:3:5: bad"},
		{Error{"f.yaml", 3, 0, "bad"}, "f.yaml:3: bad"},
		{Error{"f.yaml", 0, 0, "bad"}, "f.yaml: bad"},
		{Error{"", 3, 5, "bad"}, "3:5: bad"},
		{Error{"", 0, 0, "bad"}, "bad"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%#v: got %q, want %q", c.e, got, c.want)
		}
	}
	l := ErrorList{{"f", 1, 2, "a"}, {"f", 3, 4, "b"}}
	if got := l.Error(); got != "f:1:2: a\nf:3:4: b" {
		t.Errorf("list: %q", got)
	}
}

func TestTooManyErrors(t *testing.T) {
	_, err := ParseFile("testdata/invalid/too-many-errors.yaml")
	var list ErrorList
	if !errors.As(err, &list) || len(list) != MaxErrors+1 || list[MaxErrors].Msg != "too many errors" {
		t.Fatalf("%d errors: %v", len(list), err)
	}
}

// parse is Parse with a fixed directory, failing the test on error.
func parse(t *testing.T, src string) *Job {
	t.Helper()
	j, err := Parse("t.yaml", []byte(src), "/spec")
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return j
}

func ids(j *Job) []string {
	out := make([]string, j.Tasks.Len())
	for i := range j.Tasks.Len() {
		t := j.Tasks.At(i)
		out[i] = t.ID
	}
	return out
}

func TestExpansion(t *testing.T) {
	for _, c := range []struct {
		src    string
		ids    string // comma-separated
		params string // TaskParamsJSON of every task, space-separated
	}{
		{
			"tasks: [{range: {param: i, from: 0, to: 2}}]",
			"0000,0001,0002", `{"i":0} {"i":1} {"i":2}`,
		},
		{
			"tasks: [{range: {param: i, from: 5, to: -5, step: -4}}]",
			"0000,0001,0002", `{"i":5} {"i":1} {"i":-3}`,
		},
		{
			"tasks: [{range: {param: i, from: 0, to: 7, step: 3}}]",
			"0000,0001,0002", `{"i":0} {"i":3} {"i":6}`,
		},
		{
			"tasks: [{range: {param: i, from: 9223372036854775806, to: 9223372036854775807}}]",
			"0000,0001", `{"i":9223372036854775806} {"i":9223372036854775807}`,
		},
		{
			"tasks: [{range: {param: i, from: -9223372036854775808, to: 9223372036854775807, step: 9223372036854775807}}]",
			"0000,0001,0002", `{"i":-9223372036854775808} {"i":-1} {"i":9223372036854775806}`,
		},
		{
			"tasks: [{range: {param: i, from: 3, to: 3, step: -9223372036854775808}}]",
			"0000", `{"i":3}`,
		},
		{
			"tasks: [{grid: {a: [1, 2], b: [x, y], c: [true]}}]",
			"0000,0001,0002,0003",
			`{"a":1,"b":"x","c":true} {"a":1,"b":"y","c":true} {"a":2,"b":"x","c":true} {"a":2,"b":"y","c":true}`,
		},
		{
			"tasks: [{grid: {z: [1, 2], a: [3, 4]}}]", // written order, not sorted
			"0000,0001,0002,0003", `{"a":3,"z":1} {"a":4,"z":1} {"a":3,"z":2} {"a":4,"z":2}`,
		},
		{
			"tasks: [{id: x}, {}, {id: y}, {range: {param: i, from: 0, to: 1}}, {}]",
			"x,0001,y,0003,0004,0005", `{} {} {} {"i":0} {"i":1} {}`,
		},
	} {
		j := parse(t, "plugin: p\n"+c.src)
		if got := strings.Join(ids(j), ","); got != c.ids {
			t.Errorf("%s: ids %s, want %s", c.src, got, c.ids)
		}
		var ps []string
		for i := range j.Tasks.Len() {
			ps = append(ps, string(j.TaskParamsJSON(i)))
		}
		if got := strings.Join(ps, " "); got != c.params {
			t.Errorf("%s: params %s, want %s", c.src, got, c.params)
		}
	}
}

func TestIDWidth(t *testing.T) {
	for _, c := range []struct {
		to         int
		first, end string
	}{
		{0, "0000", "0000"},
		{9999, "0000", "9999"},
		{10000, "00000", "10000"},
		{123456, "000000", "123456"},
	} {
		j := parse(t, "plugin: p\ntasks: [{range: {param: i, from: 0, to: "+itoa(c.to)+"}}]")
		if got := j.Tasks.At(0).ID; got != c.first {
			t.Errorf("to %d: first id %q, want %q", c.to, got, c.first)
		}
		if got := j.Tasks.At(j.Tasks.Len() - 1).ID; got != c.end {
			t.Errorf("to %d: last id %q, want %q", c.to, got, c.end)
		}
	}
}

func itoa(i int) string { return string(must(json.Marshal(i))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestParamPrecedence(t *testing.T) {
	j := parse(t, `
plugin: p
params: {a: job, b: job, c: job, i: job, x: job}
tasks:
  - params: {b: task}
  - range: {param: i, from: 7, to: 7}
    params: {c: entry}
  - grid: {x: [grid]}
    params: {a: entry, c: null}
`)
	want := []string{
		`{"a":"job","b":"task","c":"job","i":"job","x":"job"}`,
		`{"a":"job","b":"job","c":"entry","i":7,"x":"job"}`,
		`{"a":"entry","b":"job","c":null,"i":"job","x":"grid"}`,
	}
	for i, w := range want {
		if got := string(j.TaskParamsJSON(i)); got != w {
			t.Errorf("task %d: %s, want %s", i, got, w)
		}
	}
	if got := string(encode(j.Params)); got != `{"a":"job","b":"job","c":"job","i":"job","x":"job"}` {
		t.Errorf("job params changed by expansion: %s", got)
	}
	// Each task has its own map.
	j.Tasks.At(0).Params["new"] = 1
	_, leaked0 := j.Tasks.At(0).Params["new"]
	if _, leaked := j.Tasks.At(1).Params["new"]; leaked || leaked0 {
		t.Error("tasks share a params map")
	}
}

func TestParamValues(t *testing.T) {
	j := parse(t, `
plugin: p
tasks:
  - params:
      i: 42
      h: 0x10
      f: 2.5
      fi: 3.0
      b: false
      n: null
      s: "x"
      d: 2024-01-31
      l: [1, [2]]
      m: {k: v}
`)
	p := j.Tasks.At(0).Params
	for k, want := range map[string]any{
		"i": int64(42), "h": int64(16), "f": 2.5, "fi": 3.0, "b": false, "n": nil, "s": "x", "d": "2024-01-31",
	} {
		if got, ok := p[k]; !ok || got != want {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
	if l, ok := p["l"].([]any); !ok || len(l) != 2 || l[0] != int64(1) {
		t.Errorf("l = %#v", p["l"])
	}
	if m, ok := p["m"].(map[string]any); !ok || m["k"] != "v" {
		t.Errorf("m = %#v", p["m"])
	}
}

func TestDefaults(t *testing.T) {
	j := parse(t, "plugin: p\ntasks: [{}]")
	if j.Timeout != DefaultTimeout || j.Retries != DefaultRetries || j.Reduce {
		t.Errorf("timeout %v retries %d reduce %v", j.Timeout, j.Retries, j.Reduce)
	}
	if want := (Verify{Replicas: 1, Quorum: 1, MaxReplicas: 2, Trust: TrustOff, DistinctHosts: true}); j.Verify != want {
		t.Errorf("verify %+v", j.Verify)
	}
	if !j.Resources.IsZero() || j.Params == nil || j.Tasks.At(0).Params == nil || j.Inputs != nil {
		t.Errorf("job %+v", j)
	}
	if j.Name != "t" || j.Output != filepath.Join("/spec", "out", "t") {
		t.Errorf("name %q output %q", j.Name, j.Output)
	}
	j = parse(t, "plugin: p\ntasks: [{}]\nverify: {replicas: 3}")
	if want := (Verify{Replicas: 3, Quorum: 3, MaxReplicas: 6, Trust: TrustOff, DistinctHosts: true}); j.Verify != want {
		t.Errorf("verify %+v", j.Verify)
	}
	j = parse(t, "plugin: p\ntasks: [{}]\nverify: {replicas: 3, quorum: 2, spot_check: 0.25}")
	if want := (Verify{Replicas: 3, Quorum: 2, MaxReplicas: 6, Trust: TrustOff, SpotCheck: 0.25, DistinctHosts: true}); j.Verify != want {
		t.Errorf("verify %+v", j.Verify)
	}
	// Replicas on distinct hosts is the default; a lab on one machine
	// relaxes it, and only then does the canonical form (the job ID) say so.
	lab := parse(t, "plugin: p\ntasks: [{}]\nverify: {replicas: 3, distinct_hosts: false}")
	if lab.Verify.DistinctHosts {
		t.Errorf("distinct_hosts: false not parsed: %+v", lab.Verify)
	}
	if c := string(lab.Canonical()); !strings.Contains(c, `"distinct_hosts":false`) {
		t.Errorf("canonical of a lab job lacks distinct_hosts: %s", c)
	}
	if c := string(j.Canonical()); strings.Contains(c, "distinct_hosts") {
		t.Errorf("canonical of a default job names distinct_hosts: %s", c)
	}
	j, err := Parse("", []byte("plugin: p\ntasks: [{}]"), "")
	if err != nil || j.Name != "job" || j.File != "" {
		t.Errorf("no file name: %v %+v", err, j)
	}
}

func TestMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"1":         1,
		"512MiB":    512 << 20,
		"512 MiB":   512 << 20,
		"1.5GiB":    3 << 29,
		"2GB":       2e9,
		"1kB":       1000,
		"1Ki":       1024,
		"100B":      100,
		"1.0000001": 1,
		"8TiB":      8 << 40,
	} {
		j := parse(t, "plugin: p\ntasks: [{}]\nresources: {memory: \""+in+"\"}")
		if j.Resources.Memory != want {
			t.Errorf("%q: %d, want %d", in, j.Resources.Memory, want)
		}
	}
	for _, in := range []string{"1mb", "1M", "1 G", "-1", "0", "0.5", "1e3", "9000000TiB", "", "MiB", "1..2B"} {
		_, err := Parse("t.yaml", []byte("plugin: p\ntasks: [{}]\nresources: {memory: \""+in+"\"}"), "/")
		if err == nil || !strings.Contains(err.Error(), "resources.memory") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestBatch(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{"", 0},
		{"batch: off", 1},
		{"batch: {max: 8}", 8},
		{"batch: {max: 1}", 1},
		{"batch: {}", 0},
	} {
		j, err := Parse("t.yaml", []byte("plugin: p\ntasks: [{}]\n"+c.src), "/")
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if j.Batch != c.want {
			t.Errorf("%q: Batch = %d, want %d", c.src, j.Batch, c.want)
		}
	}
}

// TestMessages checks single problems in inline specs, where a golden file
// per case would be noise.
func TestMessages(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"plugin: p\ntasks: [{}]\ntimeout: 1.5", `t.yaml:3:10: timeout: expected a duration like 30s, got !!float 1.5`},
		{"plugin: p\ntasks: [{}]\ntimeout: 10ms\nretries: -1", `t.yaml:4:10: retries: must be between 0 and 100, got -1`},
		{"plugin: p\ntasks: [{}]\nreduce: 1", `t.yaml:3:9: reduce: expected true or false, got !!int 1`},
		{"plugin: p\ntasks: [{}]\nbatch: sometimes", `t.yaml:3:8: batch: expected off or {max: N}, got !!str "sometimes"`},
		{"plugin: p\ntasks: [{}]\nbatch: {max: 0}", `t.yaml:3:14: batch.max: must be between 1 and 256, got 0`},
		{"plugin: p\ntasks: [{}]\nbatch:\n  size: 3", `t.yaml:4:3: unknown key "size" in batch`},
		{"plugin: p\ntasks: [{}]\nverify: 3", `t.yaml:3:9: verify: expected a mapping, got !!int 3`},
		{"plugin: p\ntasks: [{}]\nverify: {quorum: 2}", `t.yaml:3:18: verify.quorum: must not exceed verify.replicas (1), got 2`},
		{"plugin: p\ntasks: [{}]\nverify: {replicas: 101}", `t.yaml:3:20: verify.replicas: must be between 1 and 100, got 101`},
		{"plugin: p\ntasks: [{}]\nverify: {spot_check: 1.5}", `t.yaml:3:22: verify.spot_check: must be a fraction from 0 to 1, got 1.5`},
		{"plugin: p\ntasks: [{}]\nverify:\n  spot_check: -0.1", `t.yaml:4:15: verify.spot_check: must be a fraction from 0 to 1, got -0.1`},
		{"plugin: p\ntasks: [{}]\nverify: {spot_check: many}", `t.yaml:3:22: verify.spot_check: expected a number, got !!str "many"`},
		{"plugin: p\ntasks: [{}]\nresources: {cpus: .inf}", `t.yaml:3:19: resources.cpus: .inf is not a finite number (JSON has no NaN or infinity)`},
		{"plugin: p\ntasks: [{}]\nresources: {cpus: x}", `t.yaml:3:19: resources.cpus: expected a number, got !!str "x"`},
		{"plugin: p\ntasks: [{}]\nparams: {a: !!float x}", `t.yaml:3:13: cannot read "x" as !!float`},
		{"plugin: p\ntasks: [{}]\nparams: {a: \"\\uD800\"}", `t.yaml:3: YAML syntax error: found invalid Unicode character escape code`},
		{"plugin: p\ntasks: [{}]\nname: a/b", `t.yaml:3:7: name: "a/b" is not a valid job name (1 to 64 of A-Z a-z 0-9 . _ -, not . or ..)`},
		{"plugin: p\ntasks: [{}]\nname: ..", `t.yaml:3:7: name: ".." is not a valid job name (1 to 64 of A-Z a-z 0-9 . _ -, not . or ..)`},
		{"plugin: p\ntasks: [{}]\noutput: ''", `t.yaml:3:9: output: path must not be empty`},
		{"plugin: p\ntasks: [{id: " + strings.Repeat("x", 129) + "}]", `is not a valid task id`},
		{"plugin: p\ntasks:\n  - range: {param: i, from: 0, to: 1, step: x}", `t.yaml:3:45: range.step: expected an integer, got !!str "x"`},
		{"plugin: p\ntasks:\n  - range: {param: i, from: 0, to: 99999999999999999999}", `t.yaml:3:36: range.to: integer 99999999999999999999 does not fit in 64 bits`},
		{"plugin: p\ntasks:\n  - grid: {'': [1]}", `t.yaml:3:12: grid: param name must not be empty`},
		{"plugin: p\ntasks: [&a {id: x}, *a]", `t.yaml:2:21: duplicate task id "x" (first used by the task at 2:9)`},
		{"plugin: p\ntasks: [{}]\n...\n", ``},
		{"\ufeffplugin: p\ntasks: [{}]\n", ``},
		{"plugin: p\r\ntasks: [{}]\r\nfoo: 1\r\n", `t.yaml:3:1: unknown key "foo" in job spec`},
		{"plugin: p\ntasks: [{}]\nparams: {a: 1, b: [\n", `t.yaml:3: YAML syntax error: did not find expected node content`},
		{"plugin: p\ntasks: [{}]\nparams: {\"\\q\": 1}\n", `t.yaml:3: YAML syntax error: found unknown escape character`},
		{"plugin: p\ntasks: [{}]\n%TAG ! tag:x\n", `t.yaml:3: YAML syntax error`},
		{"x: 1\n---\n", `t.yaml:2:1: a spec must hold one YAML document, found a second one here`},
		{"plugin: p\ntasks: [{}]\nparams: {a: 1}\nparams: {a: 2}", `t.yaml:4:1: duplicate key "params" (first defined at 3:1)`},
		{"plugin: p\ntasks: [{}]\n? [a]\n: 1", `t.yaml:3:3: mapping keys must be strings, got a list`},
		{"plugin: p\ntasks: [{}]\n? " + strings.Repeat("k", 5000) + "\n: 1", `t.yaml:3:3: unknown key "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk..." in job spec`},
		{"plugin: p\ntasks: [{}]\ntimeout: " + strings.Repeat("é", 5000), `t.yaml:3:10: timeout: invalid duration "éééééééééééééééééééé..." (use`},
	} {
		_, err := Parse("t.yaml", []byte(c.src), "/")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", c.src, err)
		case c.want == "":
		case err == nil:
			t.Errorf("%q: no error, want %s", c.src, c.want)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%q:\n got: %v\nwant: %s", c.src, err, c.want)
		default:
			checkErrorList(t, err)
		}
	}
}

// TestLimitsAreCheap makes sure hostile documents are rejected quickly.
func TestLimitsAreCheap(t *testing.T) {
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	wide := "params: {l: [" + strings.Repeat("1,", MaxSize/2-40) + "1]}\n"
	many := "plugin: p\ntasks:\n" + strings.Repeat("- {}\n", MaxSize/6)
	for name, src := range map[string]string{
		"deep":       "plugin: p\ntasks: [{}]\nparams: {a: " + deep + "}\n",
		"wide":       "plugin: p\ntasks: [{}]\n" + wide,
		"many":       many,
		"huge range": "plugin: p\ntasks:\n- range: {param: i, from: 0, to: 999999}\n",
	} {
		start := time.Now()
		_, err := Parse(name, []byte(src), "/")
		if took := time.Since(start); took > 30*time.Second { // generous: catches blow-ups, not slowness
			t.Errorf("%s: took %v", name, took)
		}
		if name == "deep" && (err == nil || !strings.Contains(err.Error(), "nesting is deeper than 32 levels")) {
			t.Errorf("deep: %v", err)
		}
		if name != "deep" && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// countedParamBytes parses src and returns the params size computed before
// expansion and the one found in the expanded tasks.
func countedParamBytes(t testing.TB, src []byte, lim limits) (before, after uint64, ok bool) {
	p := &parser{errorSink: errorSink{file: "t.yaml"}, dir: "/", limits: lim}
	root := p.load(src)
	if root == nil {
		return 0, 0, false
	}
	j := p.job(root)
	if p.err() != nil {
		return 0, 0, false
	}
	jobs := []*Job{j}
	for _, st := range j.Stages {
		jobs = append(jobs, st.Job)
	}
	for _, j := range jobs {
		for i := range j.Tasks.Len() {
			after += uint64(len(j.TaskParamsJSON(i)))
		}
	}
	return p.paramBytes, after, true
}

func TestParamBytesCount(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	files = append(files, "", "") // and the inline cases below
	inline := []string{`plugin: p
params: {a: [1, 2], b: {c: d}, i: 0, x: 1}
tasks:
  - params: {a: 1, e: [1, [2]]}
  - range: {param: i, from: -3, to: 12}
    params: {b: "\u00e9\n<"}
  - range: {param: j, from: 0, to: 4}
  - grid: {x: [1, [2, 3]], y: [{k: v}, 2, 3]}
    params: {a: [1, 2, 3]}
`, `plugin: p
tasks:
  - {}
  - range: {param: i, from: 9, to: 11}
  - grid: {x: [1, 22], y: [a]}
`}
	for _, f := range files {
		var src []byte
		if f != "" {
			src = must(os.ReadFile(f))
		} else {
			src, inline = []byte(inline[0]), inline[1:]
		}
		before, after, ok := countedParamBytes(t, src, defaultLimits)
		if f == "" && (!ok || before == 0) {
			t.Errorf("inline spec: ok %v, %d bytes", ok, before)
		}
		if ok && before != after {
			t.Errorf("%s: counted %d bytes of params before expansion, %d after", f, before, after)
		}
	}
}
