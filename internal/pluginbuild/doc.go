// Package pluginbuild turns a job spec's `plugin:` into an executable and
// its SHA-256: either the path of an executable, or a Go package directory
// that it builds with the Go toolchain and caches by content.
//
// The cache key is the SHA-256 of everything the build depends on: the Go
// version, GOOS/GOARCH, and, for every non-standard package in the build
// (from `go list -deps`), its import path and either its source files'
// contents (packages of the main module or of locally replaced modules) or
// its module path, version and go.sum hash. A hit costs one `go list`; a
// miss runs `go build -trimpath` with CGO_ENABLED=0 into a temp file that is
// renamed into the cache, so concurrent builds of the same plugin are safe.
package pluginbuild
