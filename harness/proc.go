package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RepoRoot returns the folder holding go.mod, searching upwards from the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repo root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// FaultTag is the build tag that compiles p2pc's fault-injection
// switches in (the hidden --fault-* flags of join and blocks serve,
// node.Lie). Build uses it; the release (BuildRelease, .ci/release,
// `go build ./cmd/p2pc`) does not.
const FaultTag = "p2pcfault"

// Build compiles ./cmd/p2pc of the repository at root into out, with the
// fault-injection switches (FaultTag) the tests use. With race the binary
// has the race detector on.
//
// The binary comes from the Go build cache when the sources, the go
// command and the flags are the same as an earlier build's, whichever
// test binary or process made it (see build), so that every package's
// tests may call Build without paying for a link each.
func Build(ctx context.Context, root, out string, race bool) error {
	return build(ctx, root, out, race, "-tags", FaultTag)
}

// BuildRelease compiles ./cmd/p2pc of the repository at root into out as
// a user builds it: no build tags, so no fault injection.
func BuildRelease(ctx context.Context, root, out string) error {
	return build(ctx, root, out, false)
}

// build links through `go run -exec cp`: since Go 1.24 the go command
// caches the executables that go run links, keyed by the content of
// everything that goes into them, where `go build -o` links afresh every
// time. go run links without the symbol table and DWARF (-s -w), which
// nothing of p2pc reads: tracebacks and profiles use the runtime's own
// tables.
func build(ctx context.Context, root, out string, race bool, flags ...string) error {
	args := append([]string{"run"}, flags...)
	if race {
		args = append(args, "-race")
	}
	// go run runs `cp BINARY tmp` instead of the binary; the rename
	// puts it at out whole.
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".tmp*")
	if err != nil {
		return fmt.Errorf("build p2pc: %w", err)
	}
	tmp := f.Name()
	f.Close()
	args = append(args, "-exec", "cp", "./cmd/p2pc", tmp)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build p2pc: %w\n%s", err, b)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build p2pc: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build p2pc: %w", err)
	}
	return nil
}

// Proc is a started process with captured output.
type Proc struct {
	Name string
	cmd  *exec.Cmd

	stdout, stderr lockedBuffer
	done           chan struct{}
	waitErr        error
}

// Options for Start.
type Options struct {
	Dir string
	Env []string // added to the parent's environment
	// Name labels the process in errors (default: the binary's name).
	Name string
}

// Start runs bin with args in its own process group; the process is
// killed if this one dies (Pdeathsig).
func Start(bin string, args []string, opts Options) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.SysProcAttr = sysProcAttr(true)
	p := &Proc{Name: opts.Name, cmd: cmd, done: make(chan struct{})}
	if p.Name == "" {
		p.Name = filepath.Base(bin)
	}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if killed by a signal). On timeout the process group is killed
// and an error returned.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		<-p.done
		return -1, fmt.Errorf("%s did not exit within %s\nstderr:\n%s", p.Name, timeout, p.Stderr())
	}
	return exitCode(p.waitErr), nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// CPUTime is the user and system CPU time the process used; 0 until it
// has exited.
func (p *Proc) CPUTime() time.Duration {
	select {
	case <-p.done:
	default:
		return 0
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill SIGKILLs the whole process group and waits for the process.
func (p *Proc) Kill() {
	_ = killGroup(p.cmd.Process.Pid)
	<-p.done
}

// Stop sends SIGTERM, waits up to grace, then kills the group.
func (p *Proc) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.Kill()
}

// Stdout and Stderr return what the process wrote so far.
func (p *Proc) Stdout() string { return p.stdout.String() }
func (p *Proc) Stderr() string { return p.stderr.String() }

// WaitOutput waits until the process's stdout matches re and returns the
// first match's submatches.
func (p *Proc) WaitOutput(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return p.waitFor(ctx, re, "", p.Stdout)
}

// WaitStderr waits until the process's stderr (its log) matches re and
// returns the first match's submatches.
func (p *Proc) WaitStderr(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return p.waitFor(ctx, re, " on stderr", p.Stderr)
}

func (p *Proc) waitFor(ctx context.Context, re *regexp.Regexp, where string, out func() string) ([]string, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if m := re.FindStringSubmatch(out()); m != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting for %q%s: %w\nstderr:\n%s", p.Name, re, where, ctx.Err(), p.Stderr())
		case <-p.done:
			if m := re.FindStringSubmatch(out()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("%s exited before printing %q%s\nstderr:\n%s", p.Name, re, where, p.Stderr())
		case <-t.C:
		}
	}
}

// CheckLogs reports a panic or a data race in the process's output.
func (p *Proc) CheckLogs() error {
	out := p.Stderr() + p.Stdout()
	for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if i := strings.Index(out, bad); i >= 0 {
			// From two lines before: the runtime says why before its
			// "fatal error:" line (a thread it could not start, say).
			start := i
			for n := 0; n < 3 && start > 0; n++ {
				start = strings.LastIndexByte(out[:start-1], '\n') + 1
			}
			end := min(len(out), i+2000)
			return fmt.Errorf("%s: %s found in its output:\n%s", p.Name, bad, out[start:end])
		}
	}
	return nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -1
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
