// Package outputs turns a task's result into its output folder and
// digests that folder.
//
// A task's output is the file "data" (its inline data, if any) plus the
// regular files it listed, inside its work dir only (no links, no paths
// escaping, no control characters in names). The digest is the SHA-256
// of the canonical listing, version 2: one line
// "<sha256 of file, hex> <size> <length of name>:<slash-separated name>\n"
// per file, sorted by name; the length prefix makes the listing
// unambiguous (two different sets of files never share one). The
// coordinator and every peer compute it the same way, so a digest names
// an output wherever it was produced. Version 1 (the name without its
// length) is still computed beside it, only to check job folders written
// before version 2 (DigestAll).
package outputs
