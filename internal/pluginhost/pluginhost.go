package pluginhost

import (
	"errors"
	"fmt"
	"github.com/p2pc/p2pc/internal/plain"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// Sentinel errors. Every error of a Pool method that is not a task's own
// failure (*sdk.TaskError) is an *Error whose Kind is one of these, a
// context error, or nil (a local problem such as a missing executable).
var (
	// ErrTimeout: the call overran its timeout; the process was killed.
	ErrTimeout = errors.New("task timed out")
	// ErrCrashed: the plugin process died or its connection broke during a
	// call (os.Exit, a panic outside the task goroutine, a signal); it was
	// discarded and the next call starts a fresh one.
	ErrCrashed = errors.New("plugin crashed")
	// ErrNotPlugin: the executable started but is not a working p2pc task
	// plugin (no go-plugin handshake, wrong protocol, exited during start,
	// no handshake within StartTimeout).
	ErrNotPlugin = errors.New("not a p2pc plugin")
	// ErrChecksum: the executable's SHA-256 is not Config.Checksum.
	ErrChecksum = errors.New("plugin checksum mismatch")
	// ErrClosed: the pool is closed (or was closed during the call).
	ErrClosed = errors.New("plugin pool closed")
)

// DefaultStartTimeout bounds a plugin start when Config.StartTimeout is 0.
const DefaultStartTimeout = 10 * time.Second

// basePath is the whole PATH a plugin sees unless Config.Env overrides it.
const basePath = "/usr/local/bin:/usr/bin:/bin"

// Config says which plugin a Pool runs and how.
type Config struct {
	// Path is the plugin executable (absolute).
	Path string
	// Checksum is the executable's SHA-256 (digest.File), verified before
	// every start of a process.
	Checksum digest.ID
	// Verified is the digest.Identity of the executable as its caller
	// hashed it to Checksum ("": none). While the file keeps that identity
	// it is not hashed again (a changed file is).
	Verified string
	// Logger receives the plugin's stderr and log lines (component=plugin,
	// plugin=<base name of Path>, pid) and the pool's own lifecycle records
	// (component=pluginhost). Nil discards.
	Logger *slog.Logger
	// StartTimeout bounds a start: exec, handshake and attach. Default 10s.
	StartTimeout time.Duration
	// MaxStarting bounds the starts in flight at once (a start is CPU
	// work: more at once than cores only makes each slower). Default:
	// the machine's CPUs.
	MaxStarting int
	// Env is extra environment for the plugin ("KEY=value"). The base
	// environment is PATH=/usr/local/bin:/usr/bin:/bin and HOME and TMPDIR
	// in a private directory; nothing of the host's environment is passed.
	// Env may override the base; go-plugin's own variables come last.
	Env []string
	// Dir is the plugin's working directory. Default: a private directory
	// removed by Close.
	Dir string
	// Sandbox names what the plugin's tasks may touch besides the
	// system's shared files, the executable itself (read-only), Dir and
	// the pool's private folders (read-write): the work folders the
	// caller will hand to Run (read-write), the inputs (read-only), and
	// whether tasks may use the network. Every process is confined (see
	// package sandbox); a folder named here must exist at the first start.
	Sandbox sandbox.Policy
	// Limits bound each process and everything it starts (its own
	// cgroup, where the machine gives cgroups: see sandbox.Cgroups):
	// memory, processes, file size, idle priority. Zero fields take
	// sandbox's defaults.
	Limits sandbox.Limits
}

// Stats counts what a Pool did since NewPool.
type Stats struct {
	Starts        int64 // processes started and attached
	StartFailures int64 // starts that failed (any reason)
	Calls         int64 // Run, Reduce and Describe calls that reached a process
	WarmReuses    int64 // calls served by an already running process
	TaskErrors    int64 // calls that ended in a *sdk.TaskError
	Crashes       int64 // processes lost during a call (ErrCrashed)
	Timeouts      int64 // processes killed for overrunning a timeout
	Canceled      int64 // processes killed because the caller's ctx ended
	Live          int   // processes running now
}

// Error describes a failure of a plugin process (not of a task: those are
// *sdk.TaskError). errors.Is matches Kind and anything Err wraps.
type Error struct {
	Op     string   // "start", "run", "reduce" or "describe"
	Plugin string   // executable path
	Task   string   // task ID, if the call had one
	PID    int      // 0 if no process was started
	Status string   // exit status as the OS gave it ("exit status 3", "signal: killed"), if known
	Stderr []string // last lines the plugin wrote to stderr, oldest first
	Kind   error    // ErrCrashed, ErrTimeout, ErrNotPlugin, ErrChecksum, ErrClosed, a context error, or nil
	Err    error    // the cause
}

// Unwrap returns Kind and Err.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// tailInError is how many stderr lines Error() prints (Stderr keeps more).
const tailInError = 5

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("pluginhost: ")
	b.WriteString(e.Op)
	if e.Task != "" {
		fmt.Fprintf(&b, " task %q", e.Task)
	}
	b.WriteString(": ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(filepath.Base(e.Plugin))
	if e.PID != 0 {
		fmt.Fprintf(&b, " pid %d", e.PID)
	}
	if e.Status != "" {
		fmt.Fprintf(&b, " (%s)", e.Status)
	}
	// A process that exited with a status crashed: the broken call that
	// followed says nothing more.
	if e.Err != nil && e.Err != e.Kind && (e.Status == "" || !errors.Is(e.Kind, ErrCrashed)) {
		b.WriteString(": ")
		b.WriteString(oneLine(plain.Error(e.Err).Error()))
	}
	// The stderr lines follow, one per line, as the plugin wrote them:
	// whoever shows the error to a person picks the lines to show
	// (report.Excerpt), and the full text stays in the report.
	if len(e.Stderr) > 0 {
		b.WriteString("; stderr:")
		for _, l := range excerpt(e.Stderr) {
			b.WriteString("\n")
			b.WriteString(clip(l, 200))
		}
	}
	return b.String()
}

// excerpt picks the stderr lines an error message shows: from the last
// Go panic or fatal error if there is one (its message and first frames),
// else the last lines.
func excerpt(lines []string) []string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "panic: ") || strings.HasPrefix(lines[i], "fatal error: ") {
			lines = lines[i:]
			break
		}
	}
	if len(lines) > tailInError {
		if strings.HasPrefix(lines[0], "panic: ") || strings.HasPrefix(lines[0], "fatal error: ") {
			return lines[:tailInError]
		}
		return lines[len(lines)-tailInError:]
	}
	return lines
}

// oneLine joins the lines of a multi-line message (go-plugin's handshake
// errors have several) with "; ".
func oneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.TrimSuffix(l, ":"))
		}
	}
	return strings.Join(parts, "; ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
