package spec

import (
	"path/filepath"
	"sort"
	"testing"
)

func TestPlatformsSorted(t *testing.T) {
	if !sort.StringsAreSorted(Platforms) {
		t.Fatal("Platforms must be sorted (KnownPlatform searches it)")
	}
	for _, s := range []string{"linux/amd64", "linux/arm64", "windows/amd64", "darwin/arm64"} {
		if !KnownPlatform(s) {
			t.Errorf("%s unknown", s)
		}
	}
	for _, s := range []string{"linux", "linux/arm46", "Linux/amd64", "", "linux/amd64/v3"} {
		if KnownPlatform(s) {
			t.Errorf("%q known", s)
		}
	}
}

func TestPluginMap(t *testing.T) {
	dir := t.TempDir()
	host := HostPlatform()
	col := len("plugin: {windows/arm64: ./w.exe, "+host+": ") + 1
	j, err := Parse("t.yaml", []byte("plugin: {windows/arm64: ./w.exe, "+host+": ./bin/mine}\ntasks: [{}]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []PluginBuild{
		{Platform: host, Plugin: "./bin/mine", Path: filepath.Join(dir, "bin", "mine"), Pos: Pos{1, col}},
		{Platform: "windows/arm64", Plugin: "./w.exe", Path: filepath.Join(dir, "w.exe"), Pos: Pos{1, 25}},
	}
	if host > "windows/arm64" {
		want[0], want[1] = want[1], want[0]
	}
	if len(j.PluginBuilds) != 2 || j.PluginBuilds[0] != want[0] || j.PluginBuilds[1] != want[1] {
		t.Errorf("builds %+v, want %+v", j.PluginBuilds, want)
	}
	if j.Plugin != "./bin/mine" || j.PluginPath != filepath.Join(dir, "bin", "mine") || j.PluginPos != (Pos{1, col}) {
		t.Errorf("this machine's plugin %q %q %v", j.Plugin, j.PluginPath, j.PluginPos)
	}
	// Without this machine's platform: no plugin path (Prepare says why).
	j, err = Parse("t.yaml", []byte("plugin: {plan9/arm: ./p}\ntasks: [{}]\n"), dir)
	if err != nil || j.PluginPath != "" || len(j.PluginBuilds) != 1 || j.PluginPos != (Pos{1, 9}) {
		t.Errorf("%+v, %v", j, err)
	}
}
