package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestCanonicalIgnoresLayoutAndPaths(t *testing.T) {
	a, err := ParseFile("testdata/canonical/a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseFile("testdata/canonical/b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a.PluginPath == b.PluginPath || a.Output == b.Output || a.Inputs[0].Path == b.Inputs[1].Path {
		t.Fatal("test specs should differ in their paths")
	}
	ca, cb := a.Canonical(), b.Canonical()
	if !bytes.Equal(ca, cb) {
		t.Errorf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	// Same content, parsed against another directory.
	c := parseIn(t, "testdata/canonical/a.yaml", "/elsewhere")
	if !bytes.Equal(ca, c.Canonical()) {
		t.Errorf("directory changed the canonical form")
	}
	if !json.Valid(ca) || bytes.ContainsAny(ca, " \n\t") {
		t.Errorf("not compact JSON: %s", ca)
	}
	if !bytes.HasPrefix(ca, []byte(`{"format":"`+CanonicalFormat+`",`)) {
		t.Errorf("no format tag first: %s", ca)
	}
	// Stable across calls.
	if !bytes.Equal(ca, a.Canonical()) {
		t.Error("Canonical is not deterministic")
	}
}

func parseIn(t *testing.T, file, dir string) *Job {
	t.Helper()
	data := must(readFile(file))
	j, err := Parse(file, data, dir)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestCanonicalSeesMeaning(t *testing.T) {
	base := string(must(readFile("testdata/canonical/a.yaml")))
	ref := parseIn(t, "testdata/canonical/a.yaml", "/d").Canonical()
	for _, c := range []struct{ old, new string }{
		{"width: 640", "width: 641"},
		{"width: 640", "width: '640'"},
		{"zoom: 2.0", "zoom: 2.5"},
		{"name: canon", "name: canon2"},
		{"to: 3}", "to: 4}"},
		{"y: [a, b]", "y: [b, a]"},
		{"x: [1, 2]\n      y: [a, b]", "y: [a, b]\n      x: [1, 2]"}, // grid key order changes task order
		{"id: first", "id: second"},
		{"{name: dict,", "{name: dict2,"},
		{"reduce: true", "reduce: false"},
		{"timeout: 90s", "timeout: 91s"},
		{"retries: 1", "retries: 2"},
		{"replicas: 2}", "replicas: 2, trust: adaptive}"},
		{"replicas: 2}", "replicas: 2, spot_check: 0.1}"},
		{"memory: 1GiB", "memory: 1GB"},
		{"colors: [red, green]", "colors: [green, red]"},
		{"reduce: true", "reduce: true\nsandbox: {network: true}"},
	} {
		if !strings.Contains(base, c.old) {
			t.Fatalf("%q not in a.yaml", c.old)
		}
		src := strings.Replace(base, c.old, c.new, 1)
		j, err := Parse("a.yaml", []byte(src), "/d")
		if err != nil {
			t.Fatalf("%s -> %s: %v", c.old, c.new, err)
		}
		if bytes.Equal(ref, j.Canonical()) {
			t.Errorf("%s -> %s: canonical form unchanged", c.old, c.new)
		}
	}
}

// TestCanonicalNoSpotCheck: a job without spot checks keeps the job ID it
// had before spot checks existed.
func TestCanonicalNoSpotCheck(t *testing.T) {
	a := parse(t, "plugin: p\ntasks: [{}]\nverify: {replicas: 2}")
	b := parse(t, "plugin: p\ntasks: [{}]\nverify: {replicas: 2, spot_check: 0}")
	if !bytes.Equal(a.Canonical(), b.Canonical()) || bytes.Contains(a.Canonical(), []byte("spot_check")) {
		t.Errorf("spot_check: 0 is in the canonical form:\n%s\n%s", a.Canonical(), b.Canonical())
	}
}

// TestCanonicalSandboxOff: a job that asks for no sandbox rights has the
// canonical form (and job ID) of a spec without the section.
func TestCanonicalSandboxOff(t *testing.T) {
	a := parse(t, "plugin: p\ntasks: [{}]")
	b := parse(t, "plugin: p\ntasks: [{}]\nsandbox: {network: false}")
	if !bytes.Equal(a.Canonical(), b.Canonical()) {
		t.Errorf("sandbox: {network: false} changed the canonical form:\n%s\n%s", a.Canonical(), b.Canonical())
	}
}

func TestCanonicalInputOrder(t *testing.T) {
	a := parse(t, "plugin: p\ntasks: [{}]\ninputs: [x/a, y/b]")
	b := parse(t, "plugin: p\ntasks: [{}]\ninputs: [y/b, z/a]")
	if !bytes.Equal(a.Canonical(), b.Canonical()) {
		t.Errorf("input order or paths changed the canonical form")
	}
}

func TestTaskParamsJSON(t *testing.T) {
	j := parse(t, `plugin: p
tasks:
  - params: {z: 1, a: "<&>", m: {y: [1.5, null, true], b: -0}, u: "é"}
`)
	got := string(j.TaskParamsJSON(0))
	want := `{"a":"<&>","m":{"b":0,"y":[1.5,null,true]},"u":"é","z":1}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }
