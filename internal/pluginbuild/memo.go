package pluginbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
)

// What a warm `p2pc run` would otherwise pay before its first task: a
// cache hit of a Go package plugin ran `go list -deps` and `go env`
// (hundreds of milliseconds), and the plugin (tens of MB) was hashed. Both
// answers are remembered in CACHE/memo, each with the Identity of every
// file it was drawn from; an answer is used only while every one of
// those files keeps its identity, and is remembered only when all of them
// were stable (unchanged for digest.StableAfter) when it was made.

// stableAfter is digest.StableAfter (tests shorten it).
var stableAfter = digest.StableAfter

// stable reports whether a file that changed at changed may be
// remembered at now.
func stable(changed, now time.Time) bool {
	return !changed.IsZero() && now.Sub(changed) >= stableAfter
}

// memoDir is the folder of remembered answers in a cache folder.
const memoDir = "memo"

// memoPath names the memo of kind for name in cacheDir.
func memoPath(cacheDir, kind, name string) string {
	h := sha256.Sum256([]byte(name))
	return filepath.Join(cacheDir, memoDir, kind+"-"+hex.EncodeToString(h[:16])+".json")
}

// keyMemoPath names the memo of the cache key of the build of the Go
// package in dir for goos/goarch.
func keyMemoPath(cacheDir, dir, goos, goarch string) string {
	return memoPath(cacheDir, "key", dir+"\x00"+goos+"/"+goarch)
}

// stamps maps paths to their identity ("-": absent).
type stamps map[string]string

// stampOf is the identity of path ("-" if absent), with when it changed.
// ok is false when the identity cannot be known (the answer is not
// remembered).
func stampOf(path string) (id string, changed time.Time, ok bool) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "-", time.Time{}, true
	}
	if err != nil {
		return "", time.Time{}, false
	}
	id, changed = digest.Identity(fi)
	return id, changed, id != ""
}

// add stamps path; false if its identity is unknown or too recent to be
// remembered.
func (s stamps) add(path string, now time.Time) bool {
	id, changed, ok := stampOf(path)
	if !ok || (id != "-" && !stable(changed, now)) {
		return false
	}
	s[path] = id
	return true
}

// hold reports whether every stamped path still has its identity.
func (s stamps) hold() bool {
	for path, want := range s {
		if id, _, ok := stampOf(path); !ok || id != want {
			return false
		}
	}
	return len(s) > 0
}

// readMemo reads a remembered answer into v; false if there is none.
func readMemo(path string, v any) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// writeMemo remembers v at path (written aside and renamed: a reader sees
// the old memo or the new one). A memo that cannot be written is only a
// cost of the next run.
func writeMemo(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write memo: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write memo: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".memo-*")
	if err != nil {
		return fmt.Errorf("write memo: %w", err)
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write memo: %w", werr)
	}
	return nil
}

// digestMemo is a file's remembered digest.
type digestMemo struct {
	Stamps stamps
	Digest digest.ID
}

// fileDigest returns the SHA-256 of the file at path (absolute) and the
// identity it was computed for ("" if unknown), from the memo in cacheDir
// when the file has not changed since; cacheDir "" remembers nothing.
func fileDigest(cacheDir, path string) (digest.ID, string, error) {
	var mp string
	if cacheDir != "" {
		mp = memoPath(cacheDir, "digest", path)
		var m digestMemo
		if readMemo(mp, &m) && m.Stamps.hold() {
			return m.Digest, m.Stamps[path], nil
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return digest.ID{}, "", fmt.Errorf("digest %s: %w", path, err)
	}
	id, changed := digest.Identity(fi)
	d, err := digest.File(path)
	if err != nil {
		return digest.ID{}, "", err
	}
	// The file must be the one that was hashed: same identity after.
	if fi2, err := os.Stat(path); err != nil {
		return digest.ID{}, "", fmt.Errorf("digest %s: %w", path, err)
	} else if id2, _ := digest.Identity(fi2); id2 != id {
		id = ""
	}
	if mp != "" && id != "" && stable(changed, time.Now()) {
		_ = writeMemo(mp, digestMemo{Stamps: stamps{path: id}, Digest: d})
	}
	return d, id, nil
}

// keyMemo is a Go package plugin's remembered cache key.
type keyMemo struct {
	// Env names the toolchain and the environment it was computed in.
	Env       string
	Stamps    stamps
	Key       string
	SourceKey string
}

// buildEnv names what a build depends on besides files: the go command
// found and every GO* and CGO_* variable (GOFLAGS, GOOS, GOWORK, ...).
func buildEnv(goBin string) string {
	var vars []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") || strings.HasPrefix(kv, "CGO_") {
			vars = append(vars, kv)
		}
	}
	sort.Strings(vars)
	return goBin + "\n" + runtime.GOOS + "/" + runtime.GOARCH + "\n" + strings.Join(vars, "\n")
}

// envFiles are files outside the packages that change what the go command
// does: its binary, its settings file (`go env -w`) and every go.work
// that dir may be inside of.
func envFiles(goBin, dir string) []string {
	files := []string{goBin}
	if f := os.Getenv("GOENV"); f != "" {
		files = append(files, f)
	} else if cfg, err := os.UserConfigDir(); err == nil {
		files = append(files, filepath.Join(cfg, "go", "env"))
	}
	for d := dir; ; {
		files = append(files, filepath.Join(d, "go.work"))
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return files
}

// infoMemo is a plugin's remembered answer to Describe.
type infoMemo struct {
	Digest digest.ID       `json:"digest"`
	Info   json.RawMessage `json:"info"`
}

// RecallInfo reads into v what RememberInfo remembered for the plugin
// executable of digest d under kind (false: nothing, or unreadable).
func RecallInfo(cacheDir, kind string, d digest.ID, v any) bool {
	if cacheDir == "" {
		return false
	}
	var m infoMemo
	if !readMemo(memoPath(cacheDir, kind, d.String()), &m) || m.Digest != d {
		return false
	}
	return json.Unmarshal(m.Info, v) == nil
}

// RememberInfo remembers v, what the plugin executable of digest d said
// of itself (its Describe answer, in the form kind names), so that a run
// that starts no plugin on this machine knows it without starting one:
// the digest pins the bytes, and so the answer. Any answer that is a
// function of a file's bytes alone may be remembered so under its own
// kind (internal/job remembers the manifest a file is published under).
func RememberInfo(cacheDir, kind string, d digest.ID, v any) error {
	if cacheDir == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("remember plugin info: %w", err)
	}
	return writeMemo(memoPath(cacheDir, kind, d.String()), infoMemo{Digest: d, Info: b})
}
