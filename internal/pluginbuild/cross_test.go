package pluginbuild

import (
	"debug/elf"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestCrossBuild builds one package for two platforms: each executable is
// its platform's (ELF machine), cached apart, both share the source key
// and neither its build key; a second build of each is a cache hit.
func TestCrossBuild(t *testing.T) {
	needGo(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads ELF headers of linux builds")
	}
	src := writePackage(t, hello)
	cache := t.TempDir()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	got := map[string]*Plugin{}
	for arch, machine := range want {
		p, err := Build(t.Context(), src, cache, "linux", arch, nil)
		if err != nil {
			t.Fatalf("build for linux/%s: %v", arch, err)
		}
		f, err := elf.Open(p.Path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != machine {
			t.Errorf("linux/%s build is for %v, want %v", arch, f.Machine, machine)
		}
		f.Close()
		if p.OS != "linux" || p.Arch != arch || p.SourceKey == "" {
			t.Errorf("linux/%s build: %+v", arch, p)
		}
		var sink logSink
		again, err := Build(t.Context(), src, cache, "linux", arch, sink.logger())
		if err != nil || again.Path != p.Path || sink.has("building plugin") {
			t.Errorf("second build for linux/%s: %+v, %v, log %q: want the cached %s", arch, again, err, sink.msgs, p.Path)
		}
		got[arch] = p
	}
	a, b := got["amd64"], got["arm64"]
	if a.Path == b.Path || a.Digest == b.Digest {
		t.Errorf("the two platforms share a build: %s %s", a.Path, b.Path)
	}
	if a.SourceKey != b.SourceKey {
		t.Errorf("source keys differ across platforms: %s %s", a.SourceKey, b.SourceKey)
	}
	host, err := Resolve(t.Context(), src, cache, nil)
	if err != nil || host.Path != got[runtime.GOARCH].Path {
		t.Errorf("Resolve gave %+v, %v: want the host build %s", host, err, got[runtime.GOARCH].Path)
	}
}

// TestCrossBuildFails: a package that does not build for one platform
// fails there only, saying which platform and why.
func TestCrossBuildFails(t *testing.T) {
	needGo(t)
	src := writePackage(t, hello)
	// Only arm64 lacks want(): the other platforms build.
	for name, body := range map[string]string{
		"need.go":       "package main\n\nvar _ = want()\n",
		"want_other.go": "//go:build !arm64\n\npackage main\n\nfunc want() int { return 1 }\n",
	} {
		if err := os.WriteFile(src+"/"+name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	if _, err := Build(t.Context(), src, cache, "linux", "amd64", nil); err != nil {
		t.Fatalf("linux/amd64: %v", err)
	}
	_, err := Build(t.Context(), src, cache, "linux", "arm64", nil)
	if err == nil || !strings.Contains(err.Error(), "for linux/arm64") || !strings.Contains(err.Error(), "undefined: want") {
		t.Fatalf("linux/arm64 build: %v, want a failure that names the platform and the compiler's error", err)
	}
}
