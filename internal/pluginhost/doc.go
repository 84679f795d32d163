// Package pluginhost runs p2pc task plugins: executables built on
// plugins/sdk that serve one Task over HashiCorp go-plugin (gRPC). A Pool
// keeps up to size warm processes of one executable and hands each call
// to an idle one.
//
// # Lifecycle
//
// NewPool starts nothing (Warm starts one process in the background). A
// call (Run, Reduce, Describe) takes a slot — waiting, with its ctx, while
// size calls are in flight — and then an idle warm process. Finding none,
// it takes whichever comes first: a process another call releases, or a
// started one. It starts one itself (at most Config.MaxStarting starts in
// flight per pool, default the machine's CPUs) when the pool has no
// process at all, or once it has waited as long as a start takes (a moving
// mean of the measured starts; until one is timed it waits for the first): a
// burst of tiny tasks is served by the warm processes instead of one new
// process per task, while a long task waits at most a start's time for
// its own. A start:
//
//  1. the executable is checked (absolute path, regular file, executable)
//     and its SHA-256 is compared with Config.Checksum before an exec
//     (with go-plugin's SecureConfig.Check, called by this package:
//     go-plugin v1.8.0 hashes the empty cmd.Path when a RunnerFunc is set).
//     A pool hashes a file once per identity (device, inode, size, mtime,
//     ctime): a changed file is hashed again before its next start.
//     Config.Verified names an identity the caller already hashed to
//     Checksum (pluginbuild remembers it across runs): while the file
//     keeps it, the pool does not hash it at all;
//  2. the process is forked with go-plugin's handshake variables, the
//     go-plugin handshake is read from its stdout, the gRPC connection is
//     made and the host callback service is attached (pluginproto.Plugin);
//  3. all of it within Config.StartTimeout (default 10s), else the process
//     is killed and the start fails with ErrNotPlugin.
//
// The call then runs, at most one per process. A process goes back to the
// idle list after a success or a task's own error (*sdk.TaskError), and is
// reused by the next call (most recently used first, so a lightly loaded
// pool keeps one process hot). It is killed and forgotten when:
//
//   - the call fails in transport (the process exited, was killed by a
//     signal, or its connection broke): ErrCrashed, with the exit status
//     and the last stderr lines; the pool waits up to a second for the
//     process to exit on its own first, so the status is its own;
//   - the call overruns its timeout: ErrTimeout (the call's cancellation
//     reaches the task's ctx through gRPC, but the pool does not count on
//     the task honouring it; a task error that arrives after the timeout
//     is also a timeout). The timeout is running time: time the plugin
//     processes spent frozen (sandbox.Freeze, p2pc join
//     --pause-when-busy) does not count (withTaskTimeout);
//   - the caller's ctx ends and the task has not ended 200 ms later (a
//     tiny task mostly has: its process then stays warm): the ctx error;
//   - the pool is closed: ErrClosed;
//   - it died while idle (seen when it would be handed out; it is replaced).
//
// A process's start is the pool's, not the caller's: a caller whose ctx
// ends while the process starts gets the ctx error, and the process goes
// to the idle list (a confined start costs milliseconds; a busy swarm's
// job end used to kill every process still starting).
//
// The next call starts a fresh process. Retrying is the caller's business:
// the pool never re-runs a call.
//
// RunBatch (batch.go) runs several tasks in one process through one
// streamed call (SDK protocol 3; one Run per task for older plugins),
// reporting each as it ends, with the outcome Run would give it; a task
// alone is a single Run, whose start and end are the plugin's too (SDK
// protocol 4; for an older plugin the host's, round trip and wake-up
// included, which the coordinator would take for the task's run time
// when it sizes batches). The SDK
// ends a task's ctx at its timeout (a timeout, the process stays warm);
// the host kills a process whose task overruns it by batchGrace, or whose
// task's own ctx ends. The plugin may send up to batchHoldResults
// results in one message, holding each at most batchHoldFor (SDK
// protocol 4). A crash mid-batch blames no task: results held or sent
// just before it may have died with the process, so the caller runs the
// tasks not reported again, the first alone, and the pool's batches send
// each result alone for batchHoldOff after it (the next crash is then
// pinned to its task).
//
// Close kills every process, busy or idle, waits until each is reaped and
// every goroutine the pool or go-plugin started for it has ended (gRPC's
// own goroutines end a moment later), and removes the private directory.
//
// # Process hygiene
//
// The pool gives go-plugin its own runner.Runner (ClientConfig.RunnerFunc)
// so that each plugin process:
//
//   - gets a scrubbed environment (SkipHostEnv): PATH=/usr/local/bin:
//     /usr/bin:/bin, HOME and TMPDIR in a private directory, Config.Env,
//     then go-plugin's variables (magic cookie, protocol versions, socket
//     directory); nothing else of the host's environment;
//   - is confined (package sandbox): it may read the system's shared
//     files, its own executable and Config.Sandbox.ReadOnly, write only
//     Config.Dir, its private HOME, TMPDIR and socket folders and
//     Config.Sandbox.ReadWrite, and has no network unless
//     Config.Sandbox.Network; it runs as Config.Sandbox.User when set
//     (a root host's task user: the pool opens its paths to that user
//     first, sandbox.Grant), under a seccomp deny list. The process is
//     forked from a fresh OS thread that is confined first and lives until the process has
//     exited (it then waits for the exit, below). The pool's processes
//     share one sandbox.Confinement, made before its first start and
//     closed by Close: one private network namespace per pool, each
//     process with a Landlock domain and a seccomp filter of its own.
//     Confinement says what
//     this machine gave, and the pool logs a Warn once when files or the
//     network could not be confined;
//   - runs in Config.Dir, by default a private directory (0700) that Close
//     removes along with HOME, TMPDIR and go-plugin's socket directory
//     (all in $TMPDIR/p2pc-plugin-<host pid>-*; the sockets go to its
//     folder "s", or to a directory of that name in /tmp when $TMPDIR is
//     too long for a unix socket address). The pool owns these folders through a lock
//     held in each for its life (internal/dirlock); the first start of a
//     pool removes those whose lock it can take: hosts that died without
//     Close. The pid in the name is only for people: a PID says nothing
//     across PID namespaces;
//   - has stdin on /dev/null (go-plugin would hand it the host's stdin);
//   - leads its own process group (Setpgid) and is killed with
//     kill(-pgid, SIGKILL), so whatever it started dies with it;
//   - gets SIGKILL from the kernel when the host dies (Pdeathsig). Pdeathsig
//     is tied to the forking thread, not the process (golang/go#27505), so
//     every plugin is forked from its own goroutine locked to its OS thread
//     until the plugin has exited;
//   - is always reaped. A watcher waits for the process's exit without
//     reaping it (waitid WNOWAIT), then kills the rest of its group while
//     the zombie still holds the group ID, so the signal can never hit an
//     unrelated group that reused the number. If a descendant left the
//     group and holds the output pipes open, the host closes its ends
//     after two seconds so go-plugin can finish and reap.
//
// The pool does not use go-plugin's Managed mode: its global list of
// managed clients only grows (each restarted process would stay in it),
// and Close plus Pdeathsig already cover both an orderly and an abrupt
// end of the host. The composition root must Close every pool.
//
// Cgroups (where the machine gives them, see sandbox.Cgroups): each
// process is born in a cgroup of its own with Config.Limits (memory,
// processes; file size and idle priority apply without cgroups too).
// Without a cgroup the process gets sandbox.Rlimits instead (processes
// of the task user, address space, file size).
// After every call that leaves the process warm, every other process of
// its cgroup is killed (what the task started, double-forked daemons
// included); when the process ends or is killed the whole cgroup is
// killed and removed (after the process itself has died of its group's
// SIGKILL, up to 100 ms, so the cgroup's kill rarely finds anything left).
// A call during which the kernel killed for memory or
// refused a fork fails with a *sandbox.LimitError as Kind ("exceeded
// memory limit 256 MiB", "process limit 64 reached"; Classify: task_error).
//
// Known limits: without cgroups a descendant that left the plugin's
// process group (setsid) survives the kill; and when the host is
// SIGKILLed, only the plugin itself gets Pdeathsig — its children survive
// until the next p2pc sweeps the dead host's cgroup tree. The
// checksum is verified on the path, then the path is executed: the plugin
// store must keep executables where only p2pc can write. Hashing costs a
// little per start (about 12 ms for a 21 MB binary here).
//
// Each live process holds one OS thread (the confined one it was forked
// from) blocked in waitid.
//
// # Logs
//
// A plugin's output reaches Config.Logger as records with
// component=plugin, plugin=<executable's base name>, pid and stream
// (stderr or stdout). Lines come from the process's file descriptor 2 (Go
// panics, go-plugin's server log, children, loggers made before sdk.Serve)
// and from go-plugin's stdio stream (os.Stderr and os.Stdout after
// sdk.Serve, so sdk.Logger() made inside a task). JSON lines with
// @level/@message (hclog, sdk.Logger) or level/msg (slog) keep their level
// and become attributes; other stderr lines are Info, stdout lines Debug,
// "[WARN] "-style prefixes and Go panic traces take their level. The last
// 20 stderr lines of a process are kept for error reports.
//
// go-plugin's own stderr parser is switched off (its sub-logger for the
// plugin reports level Off, so go-plugin only copies raw lines to
// ClientConfig.Stderr): it panics on a non-string "@message", which would
// let a plugin crash the host, and it rejects any "@timestamp" not in
// hclog's exact layout. go-plugin's other messages arrive at Debug with
// component=pluginhost; the pool's own records (start failures, crashes,
// timeouts) use component=pluginhost too.
//
// # Errors
//
// A task's own failure is the *sdk.TaskError the SDK returns; the process
// stays warm. Every other error is an *Error (Op, Plugin, Task, PID, exit
// Status, Stderr tail) whose Kind is matched with errors.Is:
//
//   - ErrCrashed: the process was lost during a call;
//   - ErrTimeout: the call overran its timeout;
//   - context.Canceled or context.DeadlineExceeded: the caller's ctx ended;
//   - ErrNotPlugin: the executable started but is not a working p2pc
//     plugin (no handshake, garbage on stdout, exited during start, wrong
//     go-plugin protocol, not the p2pc Task service, no start within
//     StartTimeout, or not executable by the kernel);
//   - ErrChecksum: the file's SHA-256 is not Config.Checksum (or none set);
//   - ErrClosed: the pool was closed;
//   - no Kind (Op "start"): a local problem such as a missing or
//     non-executable file (errors.Is fs.ErrNotExist, fs.ErrPermission).
//
// ErrNotPlugin, ErrChecksum and Kind-less start errors will not go away on
// a retry; ErrCrashed and ErrTimeout may. Classify turns a call's error
// into the attempt outcome report.json records (ok, canceled, timeout,
// task_error, crashed), the same for a local slot and a peer.
// Lock order: none nested; Pool.mu, proc.mu and the log tails' are leaves (Pool.mu is released before a proc's is taken).
package pluginhost
