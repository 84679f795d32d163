// Package pluginbuild turns a job spec's `plugin:` into an executable and
// its SHA-256: either the path of an executable, or a Go package directory
// that it builds with the Go toolchain and caches by content.
//
// The cache key is the SHA-256 of everything the build depends on: the Go
// version, GOOS/GOARCH, and, for every non-standard package in the build
// (from `go list -deps`), its import path and either its source files'
// contents (packages of the main module or of locally replaced modules) or
// its module path, version and go.sum hash. Computing it costs a `go list`
// and a `go env` (hundreds of milliseconds); a miss runs `go build
// -trimpath -buildvcs=false -ldflags=-buildid=` with CGO_ENABLED=0 and
// without the user's GOFLAGS into a temp file that is renamed into the
// cache, so concurrent builds of the same plugin are safe. The build is
// reproducible: the same source built with the same Go toolchain gives
// the same bytes wherever it lies and whoever builds it (the plugin's
// digest is part of the job ID and of every task's key).
//
// Warm runs pay neither that nor the hashing of the executable: both
// answers are remembered in CACHE/memo (memo.go), the key with the
// identity (digest.Identity: device, inode, size, mtime, ctime) of every
// file and folder it was drawn from (the packages' folders and files,
// go.mod, go.sum, vendor/modules.txt, the go binary, its settings file,
// any go.work above the package) and the GO* and CGO_* environment, the
// digest with the executable's identity. An answer is used only while
// all of them are unchanged, and remembered only when none changed in the
// last digest.StableAfter (2 s: a file rewritten within its timestamps'
// granularity could otherwise keep its identity). The plugin host is told
// the identity it was hashed at (Plugin.Identity), so it does not hash
// the executable again either. A plugin's answer to Describe is
// remembered there too, by the executable's digest (RememberInfo), so
// that a run that starts no plugin on its own machine (no local slots)
// does not start one only to ask it what it is.
package pluginbuild
