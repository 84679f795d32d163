// Package digest is the one SHA-256 digest type of p2pc: block and file
// IDs, plugin and input digests, output digests and job IDs are all an ID
// — a fixed-size array (comparable, a map key) with parse, short-string
// and text (JSON, YAML) methods, written as 64 lower-case hex digits.
//
// It is a leaf: it imports nothing of this repository, so that any package
// (blocks, outputs, pluginbuild, the coordinator) can use it.
package digest
