package spec

import (
	"runtime"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// PluginBuild is one platform's executable in a per-platform plugin map
// (`plugin: {linux/amd64: ./bin/x, linux/arm64: ./bin/x-arm64}`).
type PluginBuild struct {
	Platform string // GOOS/GOARCH, one of Platforms
	Plugin   string // path as written in the spec
	Path     string // Plugin resolved against Dir; existence is not checked
	Pos      Pos    // position of the path in the spec
}

// Platforms are the GOOS/GOARCH pairs a plugin may be built for (`go tool
// dist list` of Go 1.25, without cgo-only ports).
var Platforms = []string{
	"aix/ppc64", "android/386", "android/amd64", "android/arm", "android/arm64",
	"darwin/amd64", "darwin/arm64", "dragonfly/amd64", "freebsd/386", "freebsd/amd64",
	"freebsd/arm", "freebsd/arm64", "illumos/amd64", "ios/amd64", "ios/arm64", "js/wasm",
	"linux/386", "linux/amd64", "linux/arm", "linux/arm64", "linux/loong64", "linux/mips",
	"linux/mips64", "linux/mips64le", "linux/mipsle", "linux/ppc64", "linux/ppc64le",
	"linux/riscv64", "linux/s390x", "netbsd/386", "netbsd/amd64", "netbsd/arm", "netbsd/arm64",
	"openbsd/386", "openbsd/amd64", "openbsd/arm", "openbsd/arm64", "openbsd/ppc64",
	"openbsd/riscv64", "plan9/386", "plan9/amd64", "plan9/arm", "solaris/amd64",
	"wasip1/wasm", "windows/386", "windows/amd64", "windows/arm64",
}

// KnownPlatform reports whether s is a GOOS/GOARCH pair of Platforms.
func KnownPlatform(s string) bool {
	i := sort.SearchStrings(Platforms, s)
	return i < len(Platforms) && Platforms[i] == s
}

// HostPlatform is this machine's GOOS/GOARCH.
func HostPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// pluginMap reads a per-platform plugin map into j.PluginBuilds (sorted
// by platform); Plugin and PluginPath are this machine's entry, if any
// (the submitter runs the plugin too: Describe, its own slots, reduce).
func (p *parser) pluginMap(n *yaml.Node, j *Job) {
	m := deref(n)
	if len(m.Content) == 0 {
		p.errorf(n, "plugin: the per-platform map is empty (give GOOS/GOARCH: path pairs, such as linux/amd64: ./bin/x)")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		plat, ok := p.str(k, "plugin")
		if !ok {
			continue
		}
		if !KnownPlatform(plat) {
			hint := "a GOOS/GOARCH pair such as linux/amd64 or linux/arm64 (`go tool dist list`)"
			if s := strings.ToLower(plat); s != plat && KnownPlatform(s) {
				hint = "platforms are lower case: " + s
			}
			p.errorf(k, "plugin: unknown platform %s: %s", short(plat), hint)
			continue
		}
		if seen[plat] {
			p.errorf(k, "plugin: platform %s is given twice", plat)
			continue
		}
		seen[plat] = true
		path, ok := p.path(v, "plugin."+plat)
		if !ok {
			continue
		}
		b := PluginBuild{Platform: plat, Plugin: path, Path: p.resolve(path), Pos: Pos{max(v.Line, 1), max(v.Column, 1)}}
		j.PluginBuilds = append(j.PluginBuilds, b)
		if plat == HostPlatform() {
			j.Plugin, j.PluginPath, j.PluginPos = b.Plugin, b.Path, b.Pos
		}
	}
	sort.Slice(j.PluginBuilds, func(a, b int) bool { return j.PluginBuilds[a].Platform < j.PluginBuilds[b].Platform })
}
