package pluginbuild

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
)

// memoFor makes files count as stable at once (or never) for one test.
func memoFor(t *testing.T, after time.Duration) {
	t.Helper()
	old := stableAfter
	stableAfter = after
	t.Cleanup(func() { stableAfter = old })
}

func writeExe(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDigestMemo: an executable's digest is remembered per file identity
// and used while the file is unchanged; a changed file is hashed again.
func TestDigestMemo(t *testing.T) {
	if id, _ := digest.Identity(mustStat(t, t.TempDir())); id == "" {
		t.Skip("no file identity on this OS: nothing is remembered")
	}
	memoFor(t, 0)
	dir, cache := t.TempDir(), t.TempDir()
	exe := filepath.Join(dir, "plug")
	writeExe(t, exe, "#!/bin/sh\necho one\n")
	p, err := Resolve(t.Context(), exe, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := digest.File(exe)
	if p.Digest != want || p.Identity == "" {
		t.Fatalf("digest %s identity %q, want %s", p.Digest.Short(), p.Identity, want.Short())
	}
	// The memo is what answers now: a planted digest comes back.
	mp := memoPath(cache, "digest", exe)
	var m digestMemo
	if !readMemo(mp, &m) {
		t.Fatal("no digest memo written")
	}
	planted := digest.Sum([]byte("planted"))
	m.Digest = planted
	if err := writeMemo(mp, m); err != nil {
		t.Fatal(err)
	}
	if p, err = Resolve(t.Context(), exe, cache, nil); err != nil || p.Digest != planted {
		t.Fatalf("unchanged file: digest %s (%v), want the memo's", p.Digest.Short(), err)
	}
	// A changed file (same size, even) is hashed again.
	writeExe(t, exe, "#!/bin/sh\necho two\n")
	want, _ = digest.File(exe)
	if p, err = Resolve(t.Context(), exe, cache, nil); err != nil || p.Digest != want {
		t.Fatalf("changed file: digest %s (%v), want %s", p.Digest.Short(), err, want.Short())
	}
}

// TestMemoNotOfRecentFiles: a file changed within StableAfter is not
// remembered (it could change again unseen within its timestamps'
// granularity).
func TestMemoNotOfRecentFiles(t *testing.T) {
	memoFor(t, time.Hour)
	dir, cache := t.TempDir(), t.TempDir()
	exe := filepath.Join(dir, "plug")
	writeExe(t, exe, "#!/bin/sh\necho one\n")
	if _, err := Resolve(t.Context(), exe, cache, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(memoPath(cache, "digest", exe)); !os.IsNotExist(err) {
		t.Fatalf("memo of a file changed just now: %v", err)
	}
}

// TestKeyMemo: a Go package plugin's cache key is remembered, so a warm
// resolve runs no go command; an edited source, a new file in the
// package or another GOFLAGS computes it again.
func TestKeyMemo(t *testing.T) {
	needGo(t)
	memoFor(t, 0)
	src := writePackage(t, hello)
	cache := t.TempDir()
	first, err := Resolve(t.Context(), src, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	mp := keyMemoPath(cache, src, runtime.GOOS, runtime.GOARCH)
	var m keyMemo
	if !readMemo(mp, &m) {
		t.Fatal("no key memo written")
	}
	if _, ok := m.Stamps[filepath.Join(src, "main.go")]; !ok {
		t.Fatalf("the memo does not watch main.go: %v", m.Stamps)
	}
	// Point the memo at a planted cache entry: a hit returns it.
	fake := "00" + first.Digest.String()[2:]
	plant := filepath.Join(cache, fake[:2], fake, "plugin")
	if err := os.MkdirAll(filepath.Dir(plant), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, plant, "#!/bin/sh\n")
	replant := func() {
		t.Helper()
		var cur keyMemo
		if !readMemo(mp, &cur) {
			t.Fatal("no key memo")
		}
		cur.Key = fake
		if err := writeMemo(mp, cur); err != nil {
			t.Fatal(err)
		}
		if p, err := Resolve(t.Context(), src, cache, nil); err != nil || p.Path != plant {
			t.Fatalf("warm resolve: %v, %v; want the memo's entry %s", p, err, plant)
		}
	}
	miss := func(what string, change func()) {
		t.Helper()
		replant()
		change()
		p, err := Resolve(t.Context(), src, cache, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if p.Path == plant {
			t.Errorf("%s: the remembered key was used", what)
		}
	}
	miss("edited source", func() {
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(hello+"\n// edited\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	miss("new file", func() {
		if err := os.WriteFile(filepath.Join(src, "more.go"), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	miss("GOFLAGS", func() { t.Setenv("GOFLAGS", "-trimpath") })
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestInfoMemo: a remembered Describe answer is given back for the same
// digest and kind only.
func TestInfoMemo(t *testing.T) {
	type info struct{ Name, Version string }
	cache := t.TempDir()
	d := digest.Sum([]byte("plugin a"))
	var got info
	if RecallInfo(cache, "describe-v1", d, &got) {
		t.Fatal("recalled an answer never remembered")
	}
	if err := RememberInfo(cache, "describe-v1", d, info{"echo", "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if !RecallInfo(cache, "describe-v1", d, &got) || got != (info{"echo", "1.0.0"}) {
		t.Fatalf("recalled %+v", got)
	}
	for name, c := range map[string]struct {
		dir, kind string
		d         digest.ID
	}{
		"another digest": {cache, "describe-v1", digest.Sum([]byte("plugin b"))},
		"another kind":   {cache, "describe-v2", d},
		"no cache":       {"", "describe-v1", d},
	} {
		if RecallInfo(c.dir, c.kind, c.d, &got) {
			t.Errorf("%s: recalled %+v", name, got)
		}
	}
}
