// Package pluginbuild turns a job spec's `plugin:` into an executable and
// its SHA-256. The plugin is either the path of an executable, or a Go
// package directory that it builds with the Go toolchain and caches by
// content, for this machine (Resolve) or another platform (Build: a cross
// build, CGO off).
//
// Invariants: the cache key covers everything the build depends on, and a
// build is reproducible: the same source and toolchain give the same
// bytes wherever it lies and whoever builds it. A build is written to a
// temporary file and renamed into the cache, so concurrent builds of one
// plugin are safe. A remembered answer (CACHE/memo) is used only while
// every file it was drawn from keeps its identity, and is remembered only
// when none of them changed within digest.StableAfter.
//
// docs/design/pluginbuild.md explains the key, the build flags and the memo.
package pluginbuild
