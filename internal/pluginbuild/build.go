package pluginbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
)

// Plugin is a resolved plugin executable.
type Plugin struct {
	// Path is the absolute path of the executable.
	Path string
	// Digest is the SHA-256 of the executable's bytes.
	Digest digest.ID
	// Identity is digest.Identity of the file Digest was computed from
	// ("" if unknown): pluginhost.Config.Verified, so that the plugin host
	// does not hash it again while it is unchanged.
	Identity string
	// Built says the executable came from (or was found in) the build cache.
	Built bool
	// Source is the Go package directory it was built from, if any.
	Source string
	// OS and Arch are the platform (GOOS/GOARCH) the executable was built
	// for; empty for an executable given as a file (its platform is not
	// read from it: the spec says it, or it is this machine's).
	OS, Arch string
	// SourceKey, for a built plugin, is the SHA-256 of its source and the
	// build (Go version, flags, every package's files or module version)
	// without the target platform: the same for every platform's build,
	// so that the job ID covers the source and the build, not one binary.
	SourceKey string
}

// ErrNoPlugin means the path names neither an executable nor a Go package.
var ErrNoPlugin = errors.New("not a plugin executable or Go package directory")

// Resolve returns the executable for path: path itself if it is an
// executable file, or the cached build of the Go package in directory path.
// cacheDir holds built plugins (created if missing).
func Resolve(ctx context.Context, path, cacheDir string, log *slog.Logger) (*Plugin, error) {
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolve plugin %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("resolve plugin: %w", err)
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("resolve plugin %s: %w (not a regular file)", path, ErrNoPlugin)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("resolve plugin %s: %w (file is not executable: chmod +x it)", path, ErrNoPlugin)
		}
		d, id, err := fileDigest(cacheDir, abs)
		if err != nil {
			return nil, fmt.Errorf("resolve plugin: %w", err)
		}
		return &Plugin{Path: abs, Digest: d, Identity: id}, nil
	}
	return build(ctx, abs, cacheDir, runtime.GOOS, runtime.GOARCH, log)
}

// Build returns the cached build of the Go package in directory dir for
// the platform goos/goarch (cross-built with CGO off, like Resolve's).
func Build(ctx context.Context, dir, cacheDir, goos, goarch string, log *slog.Logger) (*Plugin, error) {
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build plugin %s for %s/%s: %w", dir, goos, goarch, err)
	}
	return build(ctx, abs, cacheDir, goos, goarch, log)
}

type listedModule struct {
	Path    string
	Version string
	Sum     string
	Main    bool
	Dir     string
	Replace *listedModule
}

type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	Module     *listedModule
	Error      *struct{ Err string }
	DepsErrors []*struct{ Err string }

	GoFiles, CgoFiles, CFiles, CXXFiles, HFiles, SFiles, SysoFiles, EmbedFiles []string
}

func build(ctx context.Context, dir, cacheDir, goos, goarch string, log *slog.Logger) (*Plugin, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("build plugin %s: it is a Go package directory, but the Go toolchain is not on PATH: %w", dir, err)
	}
	env := buildEnv(goBin) + "\ntarget " + goos + "/" + goarch
	mp := keyMemoPath(cacheDir, dir, goos, goarch)
	var key, srcKey string
	var m keyMemo
	if readMemo(mp, &m) && m.Env == env && m.Stamps.hold() && m.SourceKey != "" {
		key, srcKey = m.Key, m.SourceKey
	} else {
		var st stamps
		if key, srcKey, st, err = cacheKey(ctx, goBin, dir, goos, goarch); err != nil {
			return nil, err
		}
		if st != nil {
			for _, f := range envFiles(goBin, dir) {
				if !st.add(f, time.Now()) {
					st = nil
					break
				}
			}
		}
		if st != nil {
			_ = writeMemo(mp, keyMemo{Env: env, Stamps: st, Key: key, SourceKey: srcKey})
		}
	}
	target := filepath.Join(cacheDir, key[:2], key, "plugin")
	if _, err := os.Stat(target); err == nil {
		d, id, err := fileDigest(cacheDir, target)
		if err != nil {
			return nil, fmt.Errorf("build plugin %s: %w", dir, err)
		}
		log.Debug("plugin build cache hit", "component", "pluginbuild", "dir", dir, "target", goos+"/"+goarch, "key", key[:12])
		return &Plugin{Path: target, Digest: d, Identity: id, Built: true, Source: dir, OS: goos, Arch: goarch, SourceKey: srcKey}, nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, fmt.Errorf("build plugin %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".build-*")
	if err != nil {
		return nil, fmt.Errorf("build plugin %s: %w", dir, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	log.Info("building plugin", "component", "pluginbuild", "dir", dir, "target", goos+"/"+goarch)
	cmd := exec.CommandContext(ctx, goBin, append(append([]string{"build"}, reproducible...), "-o", tmp.Name(), ".")...)
	cmd.Dir = dir
	cmd.Env = goEnv(goos, goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build plugin %s for %s/%s: go build: %w\n%s", dir, goos, goarch, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return nil, fmt.Errorf("build plugin %s: %w", dir, err)
	}
	d, id, err := fileDigest(cacheDir, target)
	if err != nil {
		return nil, fmt.Errorf("build plugin %s: %w", dir, err)
	}
	return &Plugin{Path: target, Digest: d, Identity: id, Built: true, Source: dir, OS: goos, Arch: goarch, SourceKey: srcKey}, nil
}

// cacheKey hashes everything a build of the package in dir for
// goos/goarch depends on (key), and the same without the target platform
// (srcKey: Plugin.SourceKey). It returns the identities of the files and
// folders it read (go.mod, go.sum, the packages' folders and files), or
// nil stamps if one of them changed too recently to be remembered.
func cacheKey(ctx context.Context, goBin, dir, goos, goarch string) (key, srcKey string, _ stamps, _ error) {
	now := time.Now()
	st := stamps{}
	stamp := func(path string) {
		if st != nil && !st.add(path, now) {
			st = nil
		}
	}
	cmd := exec.CommandContext(ctx, goBin, "list", "-deps", "-json", ".")
	cmd.Dir = dir
	cmd.Env = goEnv(goos, goarch)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "no Go files") {
			return "", "", nil, fmt.Errorf("resolve plugin %s: %w (a directory with no Go files)", dir, ErrNoPlugin)
		}
		return "", "", nil, fmt.Errorf("build plugin %s: go list: %w\n%s", dir, err, msg)
	}
	// hb hashes the build for the target; hs the same without the
	// target's lines (GOOS, GOARCH, GOAMD64, GOARM64); h writes to both.
	hb, hs := sha256.New(), sha256.New()
	h := io.MultiWriter(hb, hs)
	goenv := exec.CommandContext(ctx, goBin, "env", "GOVERSION", "GOEXPERIMENT", "GOOS", "GOARCH", "GOAMD64", "GOARM64")
	goenv.Env = goEnv(goos, goarch)
	env, err := goenv.Output()
	if err != nil {
		return "", "", nil, fmt.Errorf("build plugin %s: go env: %w", dir, err)
	}
	lines := strings.SplitN(string(env), "\n", 3)
	if len(lines) < 3 {
		return "", "", nil, fmt.Errorf("build plugin %s: go env printed %q", dir, env)
	}
	fmt.Fprintf(hb, "p2pc-plugin-build-v3 %s\n%s\n", strings.Join(reproducible, " "), env)
	fmt.Fprintf(hs, "p2pc-plugin-source-v1 %s\n%s\n%s\n", strings.Join(reproducible, " "), lines[0], lines[1])
	dec := json.NewDecoder(&stdout)
	var root *listedPackage
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", "", nil, fmt.Errorf("build plugin %s: decode go list: %w", dir, err)
		}
		if p.Error != nil {
			return "", "", nil, fmt.Errorf("build plugin %s: %s", dir, p.Error.Err)
		}
		root = &p
		if p.Standard {
			continue
		}
		fmt.Fprintf(h, "pkg %s\n", p.ImportPath)
		m := p.Module
		if m != nil && m.Replace != nil {
			m = m.Replace
		}
		if m != nil && !m.Main && m.Version != "" {
			fmt.Fprintf(h, "mod %s %s %s\n", m.Path, m.Version, m.Sum)
			continue
		}
		if m != nil && m.Dir != "" {
			for _, f := range []string{m.Dir, "go.mod", "go.sum", filepath.Join("vendor", "modules.txt")} {
				stamp(filepath.Join(m.Dir, f))
			}
		}
		stamp(p.Dir)
		files := slicesConcat(p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.HFiles, p.SFiles, p.SysoFiles, p.EmbedFiles)
		sort.Strings(files)
		for _, f := range files {
			stamp(filepath.Join(p.Dir, f))
			d, err := digest.File(filepath.Join(p.Dir, f))
			if err != nil {
				return "", "", nil, fmt.Errorf("build plugin %s: %w", dir, err)
			}
			fmt.Fprintf(h, "file %s %x\n", f, d)
		}
	}
	if root == nil || root.Name != "main" {
		name := "?"
		if root != nil {
			name = root.Name
		}
		return "", "", nil, fmt.Errorf("resolve plugin %s: %w (package %s is not a main package)", dir, ErrNoPlugin, name)
	}
	return hex.EncodeToString(hb.Sum(nil)), hex.EncodeToString(hs.Sum(nil)), st, nil
}

// reproducible are the flags of every plugin build: the executable
// depends on the source, the Go toolchain and the target only, not on
// where the source lies (-trimpath), on the version control system around
// it (-buildvcs=false; its state would be stamped in, and the main
// module's version taken from its tags), nor on a build ID (-buildid=).
// Two users who build the same source with the same Go get the same bytes,
// so the same plugin digest, job ID and task keys.
var reproducible = []string{"-trimpath", "-buildvcs=false", "-ldflags=-buildid="}

// goEnv is the environment of the go commands of a plugin build for
// goos/goarch: this process's, without cgo (a static executable a peer can run), and
// without the user's GOFLAGS (which may ask for VCS stamping, other tags
// or flags: the build would then differ between users).
func goEnv(goos, goarch string) []string {
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOFLAGS", "CGO_ENABLED", "GOOS", "GOARCH":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "CGO_ENABLED=0", "GOFLAGS=", "GOOS="+goos, "GOARCH="+goarch)
}

func slicesConcat(ss ...[]string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}
