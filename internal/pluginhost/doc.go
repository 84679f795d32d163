// Package pluginhost runs p2pc task plugins: executables built on
// plugins/sdk that serve one Task over HashiCorp go-plugin (gRPC). A Pool
// keeps up to size warm processes of one executable and hands each call
// to an idle one.
//
// Invariants:
//
//   - A process runs at most one call at a time. It stays warm after a
//     success or the task's own error, and is killed after a crash, a
//     timeout, or a caller whose ctx ended and whose task did not end.
//   - An executable runs only if its SHA-256 equals Config.Checksum.
//   - Every process is confined by package sandbox as far as the
//     machine allows, gets a scrubbed environment, leads its own process
//     group, gets SIGKILL when the host dies, and is always reaped.
//   - The pool never re-runs a call: retrying is the caller's business.
//
// Ownership: the pool owns its processes, their private folders (held
// through package dirlock) and their cgroups. Close kills every process,
// waits until each is reaped, and removes the folders; the composition
// root must Close every pool.
//
// Errors: a task's own failure is the *sdk.TaskError the SDK returns.
// Every other error is an *Error whose Kind (ErrCrashed, ErrTimeout,
// ErrNotPlugin, ErrChecksum, ErrClosed, or the ctx's error) is matched
// with errors.Is. Classify turns a call's error into the attempt outcome
// that report.json records.
//
// docs/design/pluginhost.md explains the lifecycle, process hygiene and
// logs.
// Lock order: none nested; Pool.mu, proc.mu and the log tails' are leaves (Pool.mu is released before a proc's is taken).
package pluginhost
