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
	_ sdk.Reducer   = (*execTask)(nil)
	_ sdk.Describer = (*execTask)(nil)
)

// Describe names the plugin.
func (*execTask) Describe() sdk.Info {
	return sdk.Info{Name: "exec", Version: "1.1.0", Portable: false}
}

// params are the task's params; see docs/plugins/exec.md.
type params struct {
	step
	CopyInputs bool `json:"copy_inputs"`
	// Normalize filters outputs before their digests are taken.
	Normalize *step `json:"normalize"`
	// Reduce is the job-level reduce command (read by Reduce only).
	Reduce *step `json:"reduce"`
}

// step is one command line with its options: the task's command, the
// normalize filter or the reduce command.
type step struct {
	Command commandLine       `json:"command"`
	Shell   bool              `json:"shell"`
	Outputs []string          `json:"outputs"`
	Env     map[string]string `json:"env"`
	Stdout  *bool             `json:"stdout"`
}

func decodeParams(req *sdk.Request) (*params, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.check(""); err != nil {
		return nil, err
	}
	if n := p.Normalize; n != nil {
		if err := n.check("normalize"); err != nil {
			return nil, err
		}
		if n.Stdout != nil {
			return nil, errors.New("exec: normalize writes the normalised output on its stdout: it takes no stdout param")
		}
	}
	return &p, nil
}

// expandOutputs expands the output names of the task and of its
// normalize filter in env, the task command's environment, and checks
// that the filter's name declared outputs.
func (p *params) expandOutputs(env map[string]string) error {
	if err := p.step.expandOutputs("", env); err != nil {
		return err
	}
	n := p.Normalize
	if n == nil {
		return nil
	}
	if err := n.expandOutputs("normalize", env); err != nil {
		return err
	}
	for _, o := range n.Outputs {
		if filepath.Clean(o) != sdk.DataFile && !slices.ContainsFunc(p.Outputs, func(d string) bool { return filepath.Clean(d) == filepath.Clean(o) }) {
			return fmt.Errorf("exec: normalize output %q is not a declared output (nor %q, the captured stdout)", o, sdk.DataFile)
		}
	}
	return nil
}

// key names a step's param k in errors: what is "" for the task's own
// command, whose keys are top-level params.
func key(what, k string) string {
	if what == "" {
		return k
	}
	return what + "." + k
}

// check validates a step's command and env; what names it in errors.
func (s *step) check(what string) error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fmt.Errorf("exec: params need a %s (a non-empty list of strings)", key(what, "command"))
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("exec: %s entry %q=%q is not a valid environment variable", key(what, "env"), k, v)
		}
	}
	return nil
}

// expandOutputs replaces each of the step's output names by its
// expansion in env (expandName) and checks that it is a local path
// inside the work dir, declared once; what names the step in errors.
func (s *step) expandOutputs(what string, env map[string]string) error {
	seen := make(map[string]bool)
	for i, o := range s.Outputs {
		x, err := expandName(o, env)
		if err != nil {
			return fmt.Errorf("exec: %s %q: %w", key(what, "output"), o, err)
		}
		if !filepath.IsLocal(x) {
			if x != o {
				return fmt.Errorf("exec: %s %q is %q once expanded: not a local path inside the work dir", key(what, "output"), o, x)
			}
			return fmt.Errorf("exec: %s %q is not a local path inside the work dir", key(what, "output"), o)
		}
		c := filepath.Clean(x)
		if seen[c] {
			return fmt.Errorf("exec: %s %q is declared twice", key(what, "output"), x)
		}
		seen[c] = true
		s.Outputs[i] = x
	}
	return nil
}

// expandName replaces $NAME and ${NAME} in an output name by the value
// of the variable NAME in env, as the command sees it (P2PC_PARAM_SCENE
// for a task's param scene). A variable env lacks, or a $ that starts no
// name, is an error: an output name never expands to less than asked.
func expandName(name string, env map[string]string) (string, error) {
	if !strings.Contains(name, "$") {
		return name, nil
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		if name[i] != '$' {
			b.WriteByte(name[i])
			i++
			continue
		}
		rest := name[i+1:]
		var v string
		var n int // bytes after the $
		if strings.HasPrefix(rest, "{") {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", errors.New("${ without its closing }")
			}
			v, n = rest[1:end], end+1
		} else {
			for n < len(rest) && isNameByte(rest[n], n == 0) {
				n++
			}
			v = rest[:n]
		}
		if v == "" || !isName(v) {
			return "", fmt.Errorf("the $ at byte %d starts no variable name ($NAME or ${NAME})", i+1)
		}
		val, ok := env[v]
		if !ok {
			return "", fmt.Errorf("$%s is not set (a task's top-level string, number or bool param p is $P2PC_PARAM_P)", v)
		}
		b.WriteString(val)
		i += 1 + n
	}
	return b.String(), nil
}

// isNameByte says whether c may stand in a variable name (first: as its
// first byte).
func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || !first && c >= '0' && c <= '9'
}

func isName(v string) bool {
	for i := range len(v) {
		if !isNameByte(v[i], i == 0) {
			return false
		}
	}
	return true
}

// argv is the command line to run.
func (s *step) argv() []string {
	if s.Shell {
		return []string{Shell, "-c", strings.Join(s.Command, " ")}
	}
	return s.Command
}

// captureStdout says whether stdout becomes the task's data.
func (s *step) captureStdout() bool { return s.Stdout == nil || *s.Stdout }

// environ builds a command's scrubbed environment (envMap) as a list
// sorted by name.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// boundEnv are the variables of the plugin's own environment that pass
// to commands: the device its slot binds (a peer's GPU slot).
var boundEnv = []string{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}

// envMap is a command's scrubbed environment: the fixed variables, the
// device its slot binds (boundEnv), the params' scalars, then extra
// (which wins).
func envMap(workDir, jobID, taskID string, params json.RawMessage, extra ...map[string]string) map[string]string {
	env := map[string]string{
		"PATH":        DefaultPath,
		"HOME":        workDir,
		"TMPDIR":      filepath.Join(workDir, "tmp"),
		"P2PC_JOB_ID": jobID,
		"P2PC_PARAMS": string(params),
	}
	if taskID != "" {
		env["P2PC_TASK_ID"] = taskID
	}
	for _, k := range boundEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, paramEnv(params))
	for _, e := range extra {
		maps.Copy(env, e)
	}
	return env
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

// Run stages the inputs, runs the command, checks its outputs and passes
// them through the normalize filter, if any.
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
	vars := envMap(req.WorkDir, req.JobID, req.TaskID, req.Params, p.Env)
	if err := p.expandOutputs(vars); err != nil {
		return nil, err
	}
	stdout, err := x.runStep(ctx, &p.step, req.WorkDir, environ(vars), req.TaskID, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := checkOutputs(req.WorkDir, p.Outputs); err != nil {
		return nil, err
	}
	if p.Normalize != nil {
		if stdout, err = x.normalize(ctx, req, p, stdout); err != nil {
			return nil, err
		}
	}
	return &sdk.Result{Data: stdout, Files: p.Outputs}, nil
}

// runStep runs one step in dir with env, stdin and stdout (nil: stdout is
// captured if the step says so, else discarded), and returns what it
// captured.
func (x *execTask) runStep(ctx context.Context, s *step, dir string, env []string, who string, stdin, stdoutTo *os.File) ([]byte, error) {
	argv := s.argv()
	path, err := lookPath(argv[0], pathOf(env))
	if err != nil {
		return nil, err
	}
	stdout, stderr, err := run(ctx, command{path: path, argv: argv, dir: dir, env: env, stdout: stdoutTo == nil && s.captureStdout(), stdin: stdin, stdoutTo: stdoutTo})
	if err != nil {
		return nil, err
	}
	if len(stderr) > 0 && x.log != nil {
		x.log.Debug("exec: command wrote to stderr", "task", who, "stderr_tail", string(stderr))
	}
	return stdout, nil
}

// normalize passes each output the filter names (default: every declared
// output, and the captured stdout if any) through it: the filter reads
// the output on stdin and writes its canonical form on stdout, which
// replaces the output. It returns the (possibly normalised) stdout data.
func (x *execTask) normalize(ctx context.Context, req *sdk.Request, p *params, data []byte) ([]byte, error) {
	n := p.Normalize
	names := n.Outputs
	if len(names) == 0 {
		names = slices.Clone(p.Outputs)
		if p.captureStdout() {
			names = append(names, sdk.DataFile)
		}
	}
	tmp := filepath.Join(req.WorkDir, "tmp")
	for _, name := range names {
		src := filepath.Join(req.WorkDir, name)
		if filepath.Clean(name) == sdk.DataFile {
			src = filepath.Join(tmp, ".stdout")
			if err := os.WriteFile(src, data, 0o600); err != nil {
				return nil, fmt.Errorf("exec: normalize %s: %w", name, err)
			}
		}
		out, err := x.filter(ctx, req, n, name, src, tmp)
		if err != nil {
			return nil, err
		}
		if filepath.Clean(name) == sdk.DataFile {
			if data, err = os.ReadFile(out); err != nil {
				return nil, fmt.Errorf("exec: normalize %s: %w", name, err)
			}
			os.Remove(out)
			os.Remove(src)
			continue
		}
		if err := os.Rename(out, src); err != nil {
			return nil, fmt.Errorf("exec: normalize %s: %w", name, err)
		}
	}
	return data, nil
}

// filter runs the normalize step with src on stdin and its stdout into a
// new file in tmp, whose path it returns.
func (x *execTask) filter(ctx context.Context, req *sdk.Request, n *step, name, src, tmp string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("exec: normalize %s: %w", name, err)
	}
	defer in.Close()
	out, err := os.CreateTemp(tmp, ".normalized-*")
	if err != nil {
		return "", fmt.Errorf("exec: normalize %s: %w", name, err)
	}
	defer out.Close()
	env := environ(envMap(req.WorkDir, req.JobID, req.TaskID, req.Params, n.Env, map[string]string{"P2PC_OUTPUT": name}))
	if _, err := x.runStep(ctx, n, req.WorkDir, env, req.TaskID, in, out); err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("exec: normalize %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("exec: normalize %s: %w", name, err)
	}
	return out.Name(), nil
}

// Reduce runs the job's reduce command once, in its own work dir, over
// every task's output: tasks/<task ID>/<output name> there links to each
// output file (the captured stdout is the file "data"), P2PC_TASKS_DIR
// names that folder and P2PC_TASK_IDS lists the task IDs in spec order.
func (x *execTask) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	r := p.Reduce
	if r == nil {
		return nil, errors.New("exec: the spec says reduce: true, but params has no reduce: {command: [...]} to run")
	}
	if err := r.check("reduce"); err != nil {
		return nil, err
	}
	if req.WorkDir == "" || !filepath.IsAbs(req.WorkDir) {
		return nil, fmt.Errorf("exec: work dir %q is not an absolute path", req.WorkDir)
	}
	tasksDir := filepath.Join(req.WorkDir, "tasks")
	ids := make([]string, 0, len(req.Tasks))
	for _, t := range req.Tasks {
		ids = append(ids, t.TaskID)
		for _, f := range t.Files {
			if !filepath.IsLocal(t.TaskID) || !filepath.IsLocal(f.Name) {
				return nil, fmt.Errorf("exec: reduce: task %s output %q is not a local name", t.TaskID, f.Name)
			}
			if err := linkFile(filepath.Join(tasksDir, t.TaskID, f.Name), f.Path); err != nil {
				return nil, fmt.Errorf("exec: reduce: task %s: %w", t.TaskID, err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(req.WorkDir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("exec: make TMPDIR: %w", err)
	}
	vars := envMap(req.WorkDir, req.JobID, "", req.Params, map[string]string{
		"P2PC_TASKS_DIR": tasksDir,
		"P2PC_TASK_IDS":  strings.Join(ids, " "),
	}, r.Env)
	if err := r.expandOutputs("reduce", vars); err != nil {
		return nil, err
	}
	stdout, err := x.runStep(ctx, r, req.WorkDir, environ(vars), "reduce", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (reduce)", err)
	}
	if err := checkOutputs(req.WorkDir, r.Outputs); err != nil {
		return nil, fmt.Errorf("%w (reduce)", err)
	}
	return &sdk.Result{Data: stdout, Files: r.Outputs}, nil
}

// linkFile makes dst (and its folders) a symlink to src.
func linkFile(dst, src string) error {
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Symlink(abs, dst)
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
	path     string   // resolved program
	argv     []string // argv[0] included
	dir      string
	env      []string
	stdout   bool     // capture stdout (else stdoutTo, else /dev/null)
	stdin    *os.File // nil: /dev/null
	stdoutTo *os.File // stdout's file, when not captured
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
	} else if c.stdoutTo != nil {
		cmd.Stdout = c.stdoutTo
	}
	if c.stdin != nil {
		cmd.Stdin = c.stdin
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
