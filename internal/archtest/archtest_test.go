package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pkg is what the rules need of a package: its path relative to the
// module ("" for the root), and its production imports, direct and
// transitive, relative to the module (imports of other modules dropped).
type pkg struct {
	Path    string
	Imports []string
	Deps    []string
	// FileImports maps a Go file to its direct imports of the module;
	// filled only for the packages whose rules name files.
	FileImports map[string][]string
	// Files are the paths of its production Go files.
	Files []string
}

// under reports whether path is root or below it.
func under(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// harnessFiles names the files of cmd/p2pc that may import the harness.
var harnessFiles = []string{"bench.go"}

// violations returns the forbidden arrows among pkgs, one line each.
func violations(pkgs []pkg) []string {
	var out []string
	bad := func(from, to, rule string) {
		out = append(out, fmt.Sprintf("%s -> %s: %s", from, to, rule))
	}
	for _, p := range pkgs {
		for _, d := range p.Deps {
			switch {
			case under(p.Path, "internal/node") && under(d, "internal/job"):
				bad(p.Path, d, "the peer must not depend on the coordinator (protocol constants live in internal/peerpb)")
			case p.Path == "internal/outputs" && (under(d, "internal/pluginhost") || under(d, "internal/pluginbuild")):
				bad(p.Path, d, "outputs must not depend on the plugin host or builder")
			case under(d, "harness") && !under(p.Path, "harness") && p.Path != "cmd/p2pc":
				bad(p.Path, d, "only harness/... and cmd/p2pc (bench.go) may depend on the harness")
			case under(d, "internal/testwait") && !under(p.Path, "harness") && p.Path != "cmd/p2pc":
				bad(p.Path, d, "internal/testwait is for tests and the harness only")
			case p.Path == "spec":
				bad(p.Path, d, "spec imports nothing of this repository")
			case under(p.Path, "internal/transport") && !under(d, "internal/transport"):
				bad(p.Path, d, "internal/transport/... imports nothing of this repository outside itself")
			case under(d, "internal/transport/transporttest"):
				bad(p.Path, d, "internal/transport/transporttest is for tests only")
			case under(p.Path, "plugins/sdk") && !under(d, "plugins/sdk"):
				bad(p.Path, d, "plugins/sdk/... imports nothing of this repository outside plugins/sdk/...")
			case under(p.Path, "plugins") && !under(p.Path, "plugins/sdk") && !under(d, "plugins/sdk"):
				bad(p.Path, d, "a plugin imports nothing of this repository but plugins/sdk/...")
			}
		}
		if p.Path == "cmd/p2pc" {
			for file, imps := range p.FileImports {
				for _, imp := range imps {
					if under(imp, "harness") && !slices.Contains(harnessFiles, file) {
						bad(p.Path+"/"+file, imp, "only "+strings.Join(harnessFiles, ", ")+" of cmd/p2pc may import the harness (p2pc bench)")
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		pkgs []pkg
		want int
	}{
		{"clean", []pkg{
			{Path: "cmd/p2pc", Deps: []string{"harness", "harness/bench", "internal/job", "internal/node"},
				FileImports: map[string][]string{"bench.go": {"harness/bench"}, "run.go": {"internal/job"}}},
			{Path: "internal/node", Deps: []string{"internal/peerpb", "internal/pluginhost"}},
			{Path: "internal/job", Deps: []string{"internal/node", "internal/peerpb"}},
			{Path: "harness/bench", Deps: []string{"harness", "internal/job"}},
			{Path: "harness/chaos", Deps: []string{"harness", "internal/testwait"}},
			{Path: "spec"},
			{Path: "plugins/sdk", Deps: []string{"plugins/sdk/pluginpb"}},
			{Path: "plugins/sdk/sdktest", Deps: []string{"plugins/sdk", "plugins/sdk/pluginpb"}},
			{Path: "plugins/echo", Deps: []string{"plugins/sdk", "plugins/sdk/pluginpb"}},
			{Path: "internal/outputs", Deps: []string{"internal/blocks"}},
			{Path: "internal/transfer", Deps: []string{"internal/transport"}},
			{Path: "internal/transport/transporttest", Deps: []string{"internal/transport"}},
		}, 0},
		{"node to job, transitively", []pkg{{Path: "internal/node", Deps: []string{"internal/job", "internal/x"}}}, 1},
		{"node subpackage to job subpackage", []pkg{{Path: "internal/node/x", Deps: []string{"internal/job/y"}}}, 1},
		{"outputs to plugin host and builder", []pkg{{Path: "internal/outputs", Deps: []string{"internal/pluginbuild", "internal/pluginhost"}}}, 2},
		{"production package to harness", []pkg{{Path: "internal/job", Deps: []string{"harness"}}}, 1},
		{"cmd/p2pc: harness outside bench.go", []pkg{{Path: "cmd/p2pc", Deps: []string{"harness/bench"},
			FileImports: map[string][]string{"run.go": {"harness/bench"}}}}, 1},
		{"spec imports the repo", []pkg{{Path: "spec", Deps: []string{"internal/report"}}}, 1},
		{"sdk imports the repo", []pkg{{Path: "plugins/sdk/sdktest", Deps: []string{"plugins/sdk", "internal/pluginhost"}}}, 1},
		{"plugin imports the repo", []pkg{{Path: "plugins/echo", Deps: []string{"plugins/sdk", "internal/blocks"}}}, 1},
		{"production package to testwait", []pkg{{Path: "internal/node", Deps: []string{"internal/testwait"}}}, 1},
		{"a harness name prefix is not the harness", []pkg{{Path: "internal/job", Deps: []string{"harnessed"}}}, 0},
		{"transport imports the repo", []pkg{{Path: "internal/transport", Deps: []string{"internal/blocks"}}}, 1},
		{"production package to transporttest", []pkg{{Path: "internal/node", Deps: []string{"internal/transport", "internal/transport/transporttest"}}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := violations(tc.pkgs); len(got) != tc.want {
				t.Errorf("violations = %d, want %d:\n%s", len(got), tc.want, strings.Join(got, "\n"))
			}
		})
	}
}

// TestRepository checks the rules against the repository's real imports.
func TestRepository(t *testing.T) {
	pkgs := list(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of the module, expected the whole repository", len(pkgs))
	}
	byPath := map[string]bool{}
	for _, p := range pkgs {
		byPath[p.Path] = true
	}
	// The rules name these packages: if one moves, the rules must follow.
	for _, want := range []string{"internal/node", "internal/job", "internal/outputs", "internal/peerpb", "internal/transport", "internal/transport/transporttest", "harness", "cmd/p2pc", "spec", "plugins/sdk"} {
		if !byPath[want] {
			t.Errorf("package %s not found: update the rules", want)
		}
	}
	if v := violations(pkgs); len(v) > 0 {
		t.Errorf("forbidden import arrows:\n%s", strings.Join(v, "\n"))
	}
}

// repoModule is the repository's root module; the SDK is a module of its
// own below it (sdkModule), listed with it.
const (
	repoModule = "github.com/p2pc/p2pc"
	sdkModule  = repoModule + "/plugins/sdk"
)

// list runs `go list -json ./... SDK/...` at the module root: the root
// module's packages and the SDK module's (a nested module is not part of
// ./...). Paths are relative to the repository.
func list(t *testing.T) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Module,Dir,GoFiles,CgoFiles,Imports,Deps,Error", "./...", sdkModule+"/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	type listed struct {
		ImportPath string
		Module     *struct{ Path string }
		Dir        string
		GoFiles    []string
		CgoFiles   []string
		Imports    []string
		Deps       []string
		Error      *struct{ Err string }
	}
	var out []pkg
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if l.Error != nil {
			t.Fatalf("go list %s: %s", l.ImportPath, l.Error.Err)
		}
		if l.Module == nil {
			t.Fatalf("go list %s: no module", l.ImportPath)
		}
		mod := repoModule
		rel := func(paths []string) []string {
			var r []string
			for _, p := range paths {
				if p == mod {
					r = append(r, "")
				} else if s, ok := strings.CutPrefix(p, mod+"/"); ok {
					r = append(r, s)
				}
			}
			return r
		}
		p := pkg{Path: rel([]string{l.ImportPath})[0], Imports: rel(l.Imports), Deps: rel(l.Deps)}
		for _, f := range append(l.GoFiles, l.CgoFiles...) {
			p.Files = append(p.Files, filepath.Join(l.Dir, f))
		}
		if p.Path == "cmd/p2pc" {
			p.FileImports = map[string][]string{}
			for _, f := range append(l.GoFiles, l.CgoFiles...) {
				p.FileImports[f] = rel(fileImports(t, filepath.Join(l.Dir, f)))
			}
		}
		out = append(out, p)
	}
	return out
}

// TestSDKModule: plugins/sdk is a module of its own whose build list does
// not hold the p2pc root module, so a plugin in another repository gets
// the SDK and its few requirements, nothing of p2pc's.
func TestSDKModule(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}", "all")
	cmd.Dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "plugins", "sdk")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all in plugins/sdk: %v\n%s", err, stderr.String())
	}
	mods := strings.Fields(string(out))
	if len(mods) == 0 || mods[0] != sdkModule {
		t.Fatalf("plugins/sdk is not the module %s: %v", sdkModule, mods)
	}
	for _, m := range mods[1:] {
		if m == repoModule || strings.HasPrefix(m, repoModule+"/") {
			t.Errorf("the SDK module's build list holds %s", m)
		}
	}
	// What a plugin's go.mod inherits: the SDK's requirements.
	cmd = exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "plugins", "sdk")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in plugins/sdk: %v", err)
	}
	var gm struct{ Require []struct{ Path string } }
	if err := json.Unmarshal(raw, &gm); err != nil {
		t.Fatal(err)
	}
	for _, r := range gm.Require {
		for _, heavy := range []string{"memberlist", "mdns", "kong", "yaml", "sqlite", "cheggaaa"} {
			if strings.Contains(r.Path, heavy) {
				t.Errorf("plugins/sdk/go.mod requires %s, a requirement of p2pc's, not of plugins", r.Path)
			}
		}
	}
	if len(gm.Require) > 14 {
		t.Errorf("plugins/sdk/go.mod has %d requirements; the SDK should need go-plugin, gRPC, protobuf and theirs only", len(gm.Require))
	}
}

// fileImports returns the import paths of one Go file.
func fileImports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatalf("parse %s: import %s: %v", path, imp.Path.Value, err)
		}
		out = append(out, p)
	}
	return out
}
