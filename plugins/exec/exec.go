package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

const (
	// DefaultPath is the PATH of the command's scrubbed environment.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
	// StderrTail is how much of the end of stderr a failure reports.
	StderrTail = 4 << 10
	// MaxStdout bounds captured stdout, which travels inline as the
	// task's data.
	MaxStdout = 64 << 20
	// Shell runs the command when params ask for shell: true.
	Shell = "/bin/sh"
)

// pipeGrace is how long output pipes may stay open after the command's
// process group is gone (held by a process that left the group).
var pipeGrace = 2 * time.Second

// execTask is the task.
type execTask struct {
	log *slog.Logger // nil: no logging
}

var (
	_ sdk.Task      = (*execTask)(nil)
	_ sdk.Describer = (*execTask)(nil)
)

// Describe names the plugin.
func (*execTask) Describe() sdk.Info {
	return sdk.Info{Name: "exec", Version: "1.0.0", Portable: false}
}

// params are the task's params; see the package comment.
type params struct {
	Command    []string          `json:"command"`
	Shell      bool              `json:"shell"`
	Outputs    []string          `json:"outputs"`
	Env        map[string]string `json:"env"`
	Stdout     *bool             `json:"stdout"`
	CopyInputs bool              `json:"copy_inputs"`
}

func decodeParams(req *sdk.Request) (*params, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return nil, errors.New("exec: params need a command (a non-empty list of strings)")
	}
	seen := make(map[string]bool)
	for _, o := range p.Outputs {
		if !filepath.IsLocal(o) {
			return nil, fmt.Errorf("exec: output %q is not a local path inside the work dir", o)
		}
		c := filepath.Clean(o)
		if seen[c] {
			return nil, fmt.Errorf("exec: output %q is declared twice", o)
		}
		seen[c] = true
	}
	for k, v := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("exec: env entry %q=%q is not a valid environment variable", k, v)
		}
	}
	return &p, nil
}

// argv is the command line to run.
func (p *params) argv() []string {
	if p.Shell {
		return []string{Shell, "-c", strings.Join(p.Command, " ")}
	}
	return p.Command
}

// captureStdout says whether stdout becomes the task's data.
func (p *params) captureStdout() bool { return p.Stdout == nil || *p.Stdout }

// environ builds the command's scrubbed environment, sorted by name.
func environ(req *sdk.Request, p *params) []string {
	env := map[string]string{
		"PATH":         DefaultPath,
		"HOME":         req.WorkDir,
		"TMPDIR":       filepath.Join(req.WorkDir, "tmp"),
		"P2PC_JOB_ID":  req.JobID,
		"P2PC_TASK_ID": req.TaskID,
		"P2PC_PARAMS":  string(req.Params),
	}
	maps.Copy(env, paramEnv(req.Params))
	maps.Copy(env, p.Env)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// paramEnv exports every top-level scalar param as P2PC_PARAM_<NAME>,
// numbers in their JSON spelling.
func paramEnv(raw json.RawMessage) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	env := make(map[string]string)
	for k, v := range m {
		var s string
		switch v = bytes.TrimSpace(v); {
		case len(v) == 0 || bytes.Equal(v, []byte("null")) || v[0] == '{' || v[0] == '[':
			continue
		case v[0] == '"':
			if json.Unmarshal(v, &s) != nil || strings.ContainsRune(s, 0) {
				continue
			}
		default: // number, true, false
			s = string(v)
		}
		env["P2PC_PARAM_"+envName(k)] = s
	}
	return env
}

// envName upper-cases k and replaces what is not a letter or digit by '_'.
func envName(k string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, k)
}

// lookPath finds name the way a shell with the given PATH would: a name
// with a slash is used as is (exec.Cmd takes a relative one relative to
// its Dir), otherwise the first executable regular file in PATH wins.
// Relative PATH entries are skipped.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: command %q not found in PATH %s", name, path)
}

// pathOf returns the PATH entry of env.
func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// Run stages the inputs, runs the command and checks its outputs.
func (x *execTask) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	p, err := decodeParams(req)
	if err != nil {
		return nil, err
	}
	if req.WorkDir == "" || !filepath.IsAbs(req.WorkDir) {
		return nil, fmt.Errorf("exec: work dir %q is not an absolute path", req.WorkDir)
	}
	if err := stageInputs(req.WorkDir, req.Inputs, p.CopyInputs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(req.WorkDir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("exec: make TMPDIR: %w", err)
	}
	env := environ(req, p)
	argv := p.argv()
	path, err := lookPath(argv[0], pathOf(env))
	if err != nil {
		return nil, err
	}
	stdout, stderr, err := run(ctx, command{path: path, argv: argv, dir: req.WorkDir, env: env, stdout: p.captureStdout()})
	if err != nil {
		return nil, err
	}
	if len(stderr) > 0 && x.log != nil {
		x.log.Debug("exec: command wrote to stderr", "task", req.TaskID, "stderr_tail", string(stderr))
	}
	if err := checkOutputs(req.WorkDir, p.Outputs); err != nil {
		return nil, err
	}
	return &sdk.Result{Data: stdout, Files: p.Outputs}, nil
}

// stageInputs makes every input available in dir under its name, as a
// symlink to its path or (copyIn) as a copy.
func stageInputs(dir string, inputs []sdk.File, copyIn bool) error {
	for _, in := range inputs {
		if !filepath.IsLocal(in.Name) {
			return fmt.Errorf("exec: input name %q is not a local path", in.Name)
		}
		src, err := filepath.Abs(in.Path)
		if err != nil {
			return fmt.Errorf("exec: input %s: %w", in.Name, err)
		}
		dst := filepath.Join(dir, in.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("exec: input %s: %w", in.Name, err)
		}
		if copyIn {
			err = copyFile(dst, src)
		} else {
			err = os.Symlink(src, dst)
		}
		if err != nil {
			return fmt.Errorf("exec: stage input %s: %w", in.Name, err)
		}
	}
	return nil
}

// copyFile copies src to a new file dst, keeping src's permission bits
// and making the copy writable by its owner.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkOutputs fails unless every declared output is a regular file in
// dir, naming all that are missing.
func checkOutputs(dir string, outputs []string) error {
	var missing []string
	for _, o := range outputs {
		fi, err := os.Lstat(filepath.Join(dir, o))
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, o)
		case err != nil:
			return fmt.Errorf("exec: output %s: %w", o, err)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("exec: output %s is not a regular file (mode %v)", o, fi.Mode())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("exec: declared outputs missing after the command: %s", strings.Join(missing, ", "))
	}
	return nil
}

// command is one command line to run.
type command struct {
	path   string   // resolved program
	argv   []string // argv[0] included
	dir    string
	env    []string
	stdout bool // capture stdout (else /dev/null)
}

// name is how errors call the command.
func (c *command) name() string { return filepath.Base(c.argv[0]) }

// run runs c in its own process group (see newCmd) and returns its stdout
// (if captured) and the tail of its stderr. When ctx ends, the group is
// killed and run returns ctx's cause; once the command has exited, what
// is left of its group is killed too. A non-zero exit is an error that
// carries the stderr tail.
func run(ctx context.Context, c command) (stdout, stderrTail []byte, err error) {
	name := c.name()
	outBuf := &limitBuffer{max: MaxStdout}
	errBuf := &tailBuffer{max: StderrTail}
	var status bytes.Buffer // the supervisor's report, if supervised
	var readers, writers []*os.File
	var wg sync.WaitGroup
	defer func() { closeAll(readers); closeAll(writers) }()
	pipe := func(w io.Writer) (*os.File, error) {
		r, wf, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("exec: pipe: %w", err)
		}
		readers, writers = append(readers, r), append(writers, wf)
		wg.Go(func() { io.Copy(w, r) })
		return wf, nil
	}
	var statusW, stdoutW *os.File
	if supervised {
		if statusW, err = pipe(&status); err != nil {
			return nil, nil, err
		}
	}
	if c.stdout {
		if stdoutW, err = pipe(outBuf); err != nil {
			return nil, nil, err
		}
	}
	stderrW, err := pipe(errBuf)
	if err != nil {
		return nil, nil, err
	}
	cmd := newCmd(c, statusW)
	if stdoutW != nil {
		cmd.Stdout = stdoutW
	}
	cmd.Stderr = stderrW

	// Start and Wait on one locked OS thread: the parent-death signal
	// fires when the thread that started the child ends, and a locked
	// thread lives until Wait has returned.
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	err = <-started
	closeAll(writers) // the child holds its own copies
	writers = nil
	if err != nil {
		closeAll(readers)
		wg.Wait()
		return nil, nil, fmt.Errorf("exec: start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		killGroup(pid)
		waitErr = <-exited
	}
	killGroup(pid)

	// The pipes close when the last process holding them is gone; one
	// that left the group could hold them for ever.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeGrace):
		closeAll(readers)
		<-drained
	}

	tail := errBuf.Bytes()
	if ctx.Err() != nil {
		return nil, tail, fmt.Errorf("exec: %s stopped: %w", name, context.Cause(ctx))
	}
	if supervised {
		waitErr = supervisorResult(status.String(), waitErr)
	}
	switch e := waitErr.(type) {
	case nil:
	case *exitStatus:
		return nil, tail, fmt.Errorf("exec: %s exited with status %d%s", name, e.code, describeTail(tail, errBuf.truncated))
	case *killedBy:
		return nil, tail, fmt.Errorf("exec: %s was killed (signal: %s)%s", name, e.signal, describeTail(tail, errBuf.truncated))
	case *startFailed:
		return nil, tail, fmt.Errorf("exec: start %s: %s", name, e.msg)
	default:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			if ee.ExitCode() >= 0 {
				return nil, tail, fmt.Errorf("exec: %s exited with status %d%s", name, ee.ExitCode(), describeTail(tail, errBuf.truncated))
			}
			return nil, tail, fmt.Errorf("exec: %s was killed (%v)%s", name, ee, describeTail(tail, errBuf.truncated))
		}
		return nil, tail, fmt.Errorf("exec: %s: %w", name, waitErr)
	}
	if outBuf.overflow {
		return nil, tail, fmt.Errorf("exec: %s wrote more than %d bytes to stdout: write big output to a declared output file (or set stdout: false)", name, MaxStdout)
	}
	return outBuf.Bytes(), tail, nil
}

// How the command ended, as the supervisor reports it.
type (
	exitStatus  struct{ code int }
	killedBy    struct{ signal string }
	startFailed struct{ msg string }
)

func (e *exitStatus) Error() string  { return fmt.Sprintf("exit status %d", e.code) }
func (e *killedBy) Error() string    { return "signal: " + e.signal }
func (e *startFailed) Error() string { return "start: " + e.msg }

// supervisorResult reads the supervisor's one-line report ("exit N",
// "signal NAME" or "start MESSAGE"). Without one (the supervisor itself
// was killed) the supervisor's own wait error stands.
func supervisorResult(report string, waitErr error) error {
	line, _, _ := strings.Cut(report, "\n")
	kind, arg, _ := strings.Cut(line, " ")
	switch kind {
	case "exit":
		var code int
		if _, err := fmt.Sscan(arg, &code); err == nil {
			if code == 0 {
				return nil
			}
			return &exitStatus{code}
		}
	case "signal":
		return &killedBy{arg}
	case "start":
		return &startFailed{arg}
	}
	return waitErr
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// describeTail formats the stderr tail for an error message.
func describeTail(tail []byte, truncated bool) string {
	if len(tail) == 0 {
		return " (stderr was empty)"
	}
	head := "stderr"
	if truncated {
		head = fmt.Sprintf("last %d bytes of stderr", len(tail))
	}
	return fmt.Sprintf("; %s:\n%s", head, strings.ToValidUTF8(string(tail), "\uFFFD"))
}

// limitBuffer keeps the first max bytes written to it and notes an
// overflow; it never fails a write, so the writer is drained. (It has no
// ReadFrom, so io.Copy goes through Write.)
type limitBuffer struct {
	buf      []byte
	max      int
	overflow bool
}

func (b *limitBuffer) Write(p []byte) (int, error) {
	keep := p
	if room := b.max - len(b.buf); len(p) > room {
		b.overflow = true
		keep = p[:max(room, 0)]
	}
	b.buf = append(b.buf, keep...)
	return len(p), nil
}

// Bytes returns what was kept.
func (b *limitBuffer) Bytes() []byte { return b.buf }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.truncated = true
		if len(b.buf) > 4*b.max {
			b.buf = append([]byte(nil), b.buf[over:]...)
		}
	}
	return len(p), nil
}

// Bytes returns the tail.
func (b *tailBuffer) Bytes() []byte {
	if len(b.buf) > b.max {
		return b.buf[len(b.buf)-b.max:]
	}
	return b.buf
}
