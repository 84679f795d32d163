// Package outputs turns a task's result into its output folder and
// digests that folder.
//
// A task's output is the file "data" (its inline data, if any) plus the
// regular files it listed, inside its work dir only (no links, no paths
// escaping). The digest is the SHA-256 of the canonical listing: one line
// "<sha256 of file, hex> <size> <slash-separated name>\n" per file, sorted
// by name. The coordinator and every peer compute it the same way, so a
// digest names an output wherever it was produced.
package outputs
