// Package outputs turns a task's result into its output folder and
// digests that folder.
//
// A task's output is the file "data", holding its inline data if any,
// plus the regular files it listed inside its work dir. Links, paths that
// escape the work dir and names with control characters are refused.
//
// The digest is the SHA-256 of the folder's canonical listing, version 2,
// described in docs/report.md. The coordinator and every peer compute it
// the same way, so a digest names an output wherever it was produced.
// DigestAll also computes version 1, only to check job folders written
// before version 2.
package outputs
