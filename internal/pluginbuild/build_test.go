package pluginbuild

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// writePackage makes a tiny standalone main module in a new folder.
func writePackage(t *testing.T, main string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/tiny\n\ngo 1.22\n",
		"main.go": main,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const hello = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"tiny\") }\n"

// logSink collects log messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.msgs = append(s.msgs, string(p))
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (s *logSink) has(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if strings.Contains(m, msg) {
			return true
		}
	}
	return false
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no Go toolchain on PATH")
	}
	if testing.Short() {
		t.Skip("builds a plugin with the Go toolchain")
	}
}

func TestBuildAndCacheHit(t *testing.T) {
	needGo(t)
	src := writePackage(t, hello)
	cache := t.TempDir()
	var sink logSink
	p, err := Resolve(t.Context(), src, cache, sink.logger())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Built || p.Source != src || !strings.HasPrefix(p.Path, cache+string(filepath.Separator)) {
		t.Errorf("plugin %+v: want a build from %s in %s", p, src, cache)
	}
	data, err := os.ReadFile(p.Path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != sha256.Sum256(data) {
		t.Error("digest is not the SHA-256 of the executable")
	}
	out, err := exec.Command(p.Path).Output()
	if err != nil || string(out) != "tiny\n" {
		t.Errorf("running the build: %q, %v", out, err)
	}
	if !sink.has("building plugin") || sink.has("cache hit") {
		t.Errorf("first resolve: log %q", sink.msgs)
	}

	// The same content again: a cache hit, same file, no build.
	fi, _ := os.Stat(p.Path)
	var sink2 logSink
	again, err := Resolve(t.Context(), src, cache, sink2.logger())
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(again.Path)
	if again.Path != p.Path || again.Digest != p.Digest || !os.SameFile(fi, fi2) || !fi.ModTime().Equal(fi2.ModTime()) {
		t.Errorf("second resolve %+v, want the cached %+v", again, p)
	}
	if !sink2.has("cache hit") || sink2.has("building plugin") {
		t.Errorf("second resolve: log %q", sink2.msgs)
	}

	// A copy of the same source elsewhere hits the same entry: the key is
	// the content, not the path.
	elsewhere := writePackage(t, hello)
	if c, err := Resolve(t.Context(), elsewhere, cache, nil); err != nil || c.Path != p.Path {
		t.Errorf("same content elsewhere: %v, %v; want %s", c, err, p.Path)
	}

	// Changed source: a new entry.
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(strings.Replace(hello, "tiny", "tinier", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Resolve(t.Context(), src, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Path == p.Path || changed.Digest == p.Digest {
		t.Errorf("changed source reused the old build %s", changed.Path)
	}
}

func TestBuildErrorNamesThePackage(t *testing.T) {
	needGo(t)
	src := writePackage(t, "package main\n\nfunc main() { var x int = \"not a number\"; _ = x }\n")
	_, err := Resolve(t.Context(), src, t.TempDir(), nil)
	if err == nil {
		t.Fatal("a broken package built")
	}
	msg := err.Error()
	if !strings.Contains(msg, "build plugin "+src) || !strings.Contains(msg, "main.go:3") {
		t.Errorf("error %q: want the package path and the compiler's position", msg)
	}
}

func TestResolveNotAPlugin(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := writePackage(t, "")
	if err := os.Remove(filepath.Join(empty, "main.go")); err != nil {
		t.Fatal(err)
	}
	lib := writePackage(t, "package lib\n")
	for _, c := range []struct {
		name, path string
		noPlugin   bool // errors.Is(err, ErrNoPlugin)
		build      bool // needs the Go toolchain
	}{
		{"missing", filepath.Join(dir, "nope"), false, false},
		{"not executable", plain, true, false},
		{"a module with no Go files", empty, true, true},
		{"not a main package", lib, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.build {
				needGo(t)
			}
			_, err := Resolve(context.Background(), c.path, t.TempDir(), nil)
			if err == nil || errors.Is(err, ErrNoPlugin) != c.noPlugin {
				t.Errorf("Resolve(%s) = %v, want ErrNoPlugin %v", c.path, err, c.noPlugin)
			}
		})
	}
	// An executable is taken as it is.
	p, err := Resolve(t.Context(), script, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Built || p.Path != script || p.Digest != sha256.Sum256([]byte("#!/bin/sh\n")) {
		t.Errorf("executable resolved as %+v", p)
	}
}

// TestReproducibleBuild: the same plugin source, copied to two folders
// (one inside a git checkout) and built by two "users" with other homes,
// other build caches of p2pc and other GOFLAGS (one asking for VCS
// stamping), gives the same executable: the same digest, so the same job
// ID and task keys.
func TestReproducibleBuild(t *testing.T) {
	needGo(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache))) // warm, whatever HOME is
	src := writePackage(t, hello)
	var digests []string
	for i, user := range []struct {
		goflags string
		git     bool
	}{{"-buildvcs=true", true}, {"", false}} {
		home := t.TempDir()
		dir := filepath.Join(t.TempDir(), "user", "src", "plugin")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HOME", home)
		t.Setenv("GOFLAGS", user.goflags)
		if user.git {
			for _, args := range [][]string{{"init", "-q"}, {"add", "."},
				{"-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q", "-m", "plugin"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
		}
		p, err := Resolve(context.Background(), dir, filepath.Join(home, "cache"), nil)
		if err != nil {
			t.Fatalf("user %d: %v", i, err)
		}
		digests = append(digests, p.Digest.String())
	}
	if digests[0] != digests[1] {
		t.Fatalf("the same source gave two plugins: %s (in git, GOFLAGS=-buildvcs=true) and %s", digests[0], digests[1])
	}
}
