package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// TestValidatePlugin: p2pc validate builds the plugin and starts it, as
// p2pc run does: a Go package that does not compile, an executable that
// is no p2pc plugin and a plugin without the reduce step the spec asks
// for are each refused at the plugin value's place; a good plugin is
// named with its version.
func TestValidatePlugin(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(broken, "go.mod"), []byte("module broken\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644)
	script := filepath.Join(dir, "script.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755)
	tests := []struct {
		name, spec, want string
	}{
		{"does not compile", "name: x\nplugin: ./broken\ntasks: [{id: a}]\n", `2:9: plugin "./broken": build plugin`},
		{"no p2pc plugin", "name: x\nplugin: /bin/true\ntasks: [{id: a}]\n", `2:9: plugin "/bin/true": pluginhost: start: not a p2pc plugin`},
		{"a script", "name: x\nplugin: " + script + "\ntasks: [{id: a}]\n", "2:9: plugin " + `"` + script + `": pluginhost: start: not a p2pc plugin`},
		{"no reduce", "name: x\nplugin: {{repo}}/plugins/echo\nreduce: true\ntasks: [{id: a}]\n", `2:9: the spec asks for reduce, but plugin`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := writeSpec(t, dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml", tt.spec)
			r := p2pc(t, "validate", spec)
			if r.code != exitBadInput || !strings.Contains(r.stderr, spec+":"+tt.want) || strings.Contains(r.stdout, "ok") {
				t.Fatalf("exit %d, want %d and %q in stderr:\n%s%s", r.code, exitBadInput, spec+":"+tt.want, r.stdout, r.stderr)
			}
		})
	}
	good := writeSpec(t, dir, "good.yaml", "plugin: {{repo}}/plugins/echo\ntasks: [{id: a}]\n")
	if r := p2pc(t, "validate", good); r.code != 0 || !strings.Contains(r.stdout, "plugin "+repoRoot+"/plugins/echo (echo ") {
		t.Fatalf("validate good: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestExecOutputNamesExpand: the exec plugin's output names expand the
// task's params as its command sees them (outputs:
// [$P2PC_PARAM_SCENE.png]); a param that would take an output out of
// the work folder fails its task, saying so.
func TestExecOutputNamesExpand(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	spec := writeSpec(t, dir, "x.yaml", `
plugin: {{repo}}/plugins/exec
retries: 0
params:
  command: ["echo $P2PC_PARAM_SCENE > $P2PC_PARAM_SCENE.png"]
  shell: true
  outputs: [$P2PC_PARAM_SCENE.png]
tasks:
  - {id: hall, params: {scene: hall}}
  - {id: attic, params: {scene: attic}}
  - {id: escape, params: {scene: ../../x}}
`)
	if r := p2pc(t, "validate", spec); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--slots", "2", "--no-progress")
	if r.code != exitTaskFailed {
		t.Fatalf("run: exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	for _, scene := range []string{"hall", "attic"} {
		b, err := os.ReadFile(filepath.Join(out, "tasks", scene, scene+".png"))
		if err != nil || string(b) != scene+"\n" {
			t.Errorf("task %s: %s.png = %q, %v", scene, scene, b, err)
		}
	}
	for _, task := range readReport(t, out).Tasks {
		if task.ID == "escape" {
			if task.State != report.TaskFailed || !strings.Contains(task.Error, `output "$P2PC_PARAM_SCENE.png" is "../../x.png" once expanded: not a local path inside the work dir`) {
				t.Errorf("task escape: %s: %s", task.State, task.Error)
			}
		} else if task.State != report.TaskDone {
			t.Errorf("task %s: %s: %s", task.ID, task.State, task.Error)
		}
	}
}
