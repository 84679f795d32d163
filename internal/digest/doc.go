// Package digest is the one SHA-256 digest type of p2pc. Block and file
// IDs, plugin and input digests, output digests and job IDs are all an
// ID: a fixed-size array, usable as a map key, written as 64 lower-case
// hex digits, with parse, short-string and text methods.
//
// It imports nothing of this repository, so any package may use it.
package digest
