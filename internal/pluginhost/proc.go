package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

const (
	// crashGrace is how long a call that failed in transport waits for the
	// process to exit on its own (to report its real exit status) before
	// killing it.
	crashGrace = time.Second
	// pipeGrace is how long after the plugin's exit its output pipes may
	// stay open (held by a descendant that left the process group) before
	// the host closes its ends, so go-plugin can reap the process.
	pipeGrace = 2 * time.Second
)

var errStopped = errors.New("process stopped before it started")

// proc is one plugin process and its go-plugin client.
type proc struct {
	pool   *Pool
	client *plugin.Client
	task   *pluginproto.Client
	tail   tail
	stderr *lineWriter // file descriptor 2
	sync   [2]*lineWriter

	startDone chan struct{} // closed when the start attempt is over
	exited    chan struct{} // closed when the process has exited (not yet reaped)
	wg        sync.WaitGroup
	down      sync.Once
	timedOut  atomic.Bool // the start watchdog fired

	// mu is a leaf.
	mu     sync.Mutex
	killed bool // no start after this; kill on start
	pid    int
	os     *os.Process
	reaped bool // the pid may be reused: do not signal it
	state  *os.ProcessState
	cg     *sandbox.Cgroup // nil without cgroups
}

func newProc(pl *Pool) *proc {
	p := &proc{pool: pl, startDone: make(chan struct{}), exited: make(chan struct{})}
	p.stderr = &lineWriter{p: p, stream: "stderr", plain: slog.LevelInfo, keep: true}
	p.sync[0] = &lineWriter{p: p, stream: "stdout", plain: slog.LevelDebug}
	p.sync[1] = &lineWriter{p: p, stream: "stderr", plain: slog.LevelInfo, keep: true}
	return p
}

func (p *proc) pidValue() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// killGroup SIGKILLs the process and everything in its process group, now
// or as soon as it starts. It does not wait.
func (p *proc) killGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	if p.pid != 0 && !p.reaped {
		killTree(p.pid, p.os)
	}
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// shutdown kills the process group, waits until go-plugin's goroutines,
// the process and this package's watcher are done, and forgets the
// process. Safe to call many times and concurrently; all callers wait.
func (p *proc) shutdown() {
	p.down.Do(func() {
		p.killGroup()
		cg := p.cgroup()
		if cg != nil {
			p.awaitExit(exitWait)
			cg.Kill()
		}
		<-p.startDone
		if p.client != nil {
			p.client.Kill()
		}
		p.wg.Wait()
		p.stderr.flush()
		p.sync[0].flush()
		p.sync[1].flush()
		if cg != nil {
			if err := cg.Close(); err != nil {
				p.pool.hostLog.Warn("remove plugin cgroup", "err", err)
			}
		}
		p.pool.forget(p)
	})
}

// exitWait bounds how long shutdown waits for a SIGKILLed plugin to die
// before it kills its cgroup.
const exitWait = 100 * time.Millisecond

// awaitExit waits up to d for the started process to exit. The SIGKILL
// of its process group has usually ended everything in its cgroup by
// then, so the cgroup's kill is one read of its list, not a freeze, a
// kill and a wait polled every millisecond.
func (p *proc) awaitExit(d time.Duration) {
	if p.pidValue() == 0 || sandbox.Paused() {
		return // never started (nothing closes exited), or frozen: it dies once its cgroup's kill thaws it
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
}

// shutdownAfterCrash gives a process whose call failed in transport a
// moment to exit on its own, so its own exit status is reported.
func (p *proc) shutdownAfterCrash() {
	t := time.NewTimer(crashGrace)
	select {
	case <-p.exited:
	case <-t.C:
	}
	t.Stop()
	p.shutdown()
}

// status is the exit status after shutdown, "" before.
func (p *proc) status() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return ""
	}
	return p.state.String()
}

// start starts the process, completes the handshake and attaches the host
// callbacks. On error the process is gone.
func (p *proc) start(ctx context.Context) error {
	pl := p.pool
	defer close(p.startDone)
	p.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginpb.Handshake,
		Plugins:          plugin.PluginSet{pluginpb.PluginName: &pluginproto.Plugin{}},
		RunnerFunc:       p.newRunner,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// Not Managed: go-plugin's list of managed clients only grows; the
		// pool kills its processes in Close, and Pdeathsig kills them if
		// the host dies without Close.
		Managed:      false,
		SkipHostEnv:  true,
		StartTimeout: pl.startTimeout,
		// SecureConfig is checked in newRunner: with a RunnerFunc,
		// go-plugin v1.8.0 would hash cmd.Path, which is empty.
		Logger:           &hcLogger{l: pl.hostLog, mute: filepath.Base(pl.cfg.Path)},
		Stderr:           p.stderr,
		SyncStdout:       p.sync[0],
		SyncStderr:       p.sync[1],
		UnixSocketConfig: pl.socketConfig(),
	})

	stopCtx := context.AfterFunc(ctx, p.killGroup)
	watchdog := time.AfterFunc(pl.startTimeout, func() {
		p.timedOut.Store(true)
		p.killGroup()
	})
	handshook := false
	_, err := p.client.Start()
	var raw any
	if err == nil {
		handshook = true
		var rpc plugin.ClientProtocol
		if rpc, err = p.client.Client(); err == nil {
			raw, err = rpc.Dispense(pluginpb.PluginName)
		}
	}
	// Both must be stopped; either having fired means the process is dead.
	if stoppedW, stoppedC := watchdog.Stop(), stopCtx(); (!stoppedW || !stoppedC) && err == nil {
		err = errStopped
	}
	if err == nil {
		c, ok := raw.(*pluginproto.Client)
		if !ok {
			err = fmt.Errorf("dispensed %T, want *pluginproto.Client", raw)
		}
		p.task = c
	}
	p.mu.Lock()
	if err == nil && p.killed {
		err = errStopped
	}
	p.mu.Unlock()
	if err != nil {
		return p.startError(ctx, handshook, err)
	}
	return nil
}

// startError says why a start failed; the caller shuts the process down.
func (p *proc) startError(ctx context.Context, handshook bool, err error) error {
	var e *Error
	if errors.As(err, &e) { // from newRunner: checksum or file problem
		return e
	}
	e = &Error{Op: "start", Plugin: p.pool.cfg.Path, PID: p.pidValue(), Err: err}
	switch {
	case p.pool.isClosed():
		e.Kind = ErrClosed
	case ctx.Err() != nil:
		e.Kind = ctx.Err()
	case p.timedOut.Load(): // go-plugin's error then only tells how the kill looked
		e.Kind = ErrNotPlugin
		e.Err = fmt.Errorf("not started within %v (StartTimeout)", p.pool.startTimeout)
	case errors.Is(err, syscall.ENOEXEC):
		e.Kind = ErrNotPlugin
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		// exec failed: a local problem (or a missing script interpreter)
	case handshook:
		e.Kind = ErrCrashed
		if status.Code(err) == codes.Unimplemented {
			e.Kind = ErrNotPlugin
			e.Err = fmt.Errorf("speaks go-plugin but not the p2pc task protocol: %w", err)
		}
	default:
		e.Kind = ErrNotPlugin
	}
	return e
}

// finishError completes an Error after the process is down: exit status
// and stderr tail are known only then.
func (p *proc) finishError(e *Error) *Error {
	if e.PID == 0 {
		e.PID = p.pidValue()
	}
	e.Status = p.status()
	e.Stderr = p.tail.get()
	return e
}

// newRunner is go-plugin's RunnerFunc. cmd carries only go-plugin's
// environment (SkipHostEnv); the plugin gets a fresh command of its own.
func (p *proc) newRunner(_ hclog.Logger, cmd *exec.Cmd, _ string) (runner.Runner, error) {
	pl := p.pool
	if err := pl.checkExecutable(); err != nil {
		return nil, err
	}
	c := exec.Command(pl.cfg.Path)
	c.Env = make([]string, 0, 3+len(pl.cfg.Env)+len(cmd.Env))
	c.Env = append(c.Env, "PATH="+basePath, "HOME="+pl.dirs.home, "TMPDIR="+pl.dirs.tmp)
	c.Env = append(c.Env, pl.cfg.Env...)
	c.Env = append(c.Env, cmd.Env...) // last wins: go-plugin's cookie and socket dir
	c.Dir = pl.dirs.work
	c.Stdin = nil // /dev/null: go-plugin would pass the host's stdin
	c.SysProcAttr = sysProcAttr()
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.StderrPipe()
	if err != nil {
		stdout.Close()
		return nil, err
	}
	return &procRunner{p: p, cmd: c, stdout: stdout, stderr: stderr, waiting: make(chan struct{})}, nil
}

// Check verifies that the pool's executable is a regular executable file
// whose SHA-256 is Config.Checksum. The result is kept per file identity,
// so checking an unchanged file again costs a stat.
func (pl *Pool) Check() error { return pl.checkExecutable() }

// checkExecutable verifies the file and its checksum right before exec.
func (pl *Pool) checkExecutable() error {
	path := pl.cfg.Path
	fail := func(kind, err error) error {
		return &Error{Op: "start", Plugin: path, Kind: kind, Err: err}
	}
	if !filepath.IsAbs(path) {
		return fail(nil, fmt.Errorf("plugin path %q is not absolute", path))
	}
	st, err := os.Stat(path)
	if err != nil {
		return fail(nil, err)
	}
	if !st.Mode().IsRegular() {
		return fail(nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type()))
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fail(nil, fmt.Errorf("%s is not executable (mode %v): %w", path, st.Mode().Perm(), fs.ErrPermission))
	}
	if pl.cfg.Checksum.IsZero() {
		return fail(ErrChecksum, errors.New("Config.Checksum is not set (see Digest)"))
	}
	// Hashing the executable before every start is most of a cold peer's
	// CPU (512 starts of a 15 MB binary for 16 x 32 slots): hash it once
	// per file identity. A changed file (inode, size, mtime or ctime)
	// is hashed again.
	id := fileIdentity(st)
	pl.mu.Lock()
	verified := id != "" && pl.verified == id
	pl.mu.Unlock()
	if verified {
		return nil
	}
	sc := &plugin.SecureConfig{Checksum: pl.cfg.Checksum[:], Hash: sha256.New()}
	ok, err := sc.Check(path)
	if err != nil {
		return fail(nil, fmt.Errorf("verify checksum: %w", err))
	}
	if !ok {
		got, _ := digest.File(path)
		return fail(ErrChecksum, fmt.Errorf("sha256 %s, want %s",
			hex.EncodeToString(got[:8]), hex.EncodeToString(pl.cfg.Checksum[:8])))
	}
	pl.mu.Lock()
	pl.verified = id
	pl.mu.Unlock()
	return nil
}

// procRunner is the runner.Runner of one plugin process: its own process
// group, stdin closed, killed as a group, swept on exit, always reaped.
type procRunner struct {
	p       *proc
	cmd     *exec.Cmd
	stdout  io.ReadCloser
	stderr  io.ReadCloser
	waiting chan struct{} // closed when go-plugin calls Wait
}

var _ runner.Runner = (*procRunner)(nil)

func (r *procRunner) Start(context.Context) error {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		r.stdout.Close()
		r.stderr.Close()
		return errStopped
	}
	p.wg.Add(1)
	p.cg = p.pool.newCgroup()
	st, err := spawn(r.cmd, p.pool.confinement(), p.cg, p.pool.cfg.Limits, r.watch)
	if err != nil {
		p.wg.Done()
		return err
	}
	p.pool.noteConfinement(st)
	p.pid, p.os = r.cmd.Process.Pid, r.cmd.Process
	if err := sandbox.Floor(p.pid, p.pool.cfg.Limits); err != nil {
		p.pool.hostLog.Warn("plugin resource limits", "pid", p.pid, "err", err)
	}
	if p.cg == nil && !sandbox.Probe().Disabled {
		if err := sandbox.Rlimits(p.pid, p.pool.cfg.Limits); err != nil {
			p.pool.hostLog.Warn("plugin resource limits", "pid", p.pid, "err", err)
		}
	}
	return nil
}

// watch waits for the plugin's exit, then kills what is left of its
// process group while the zombie still holds the group ID. A descendant
// that left the group may hold the output pipes open, which would keep
// go-plugin from ever reaping the plugin: their ends are closed after
// pipeGrace.
func (r *procRunner) watch() {
	p := r.p
	defer p.wg.Done()
	if !haveExitWatch {
		return
	}
	pid := r.cmd.Process.Pid
	if err := waitExit(pid); err != nil {
		p.pool.hostLog.Warn("wait for plugin exit", "pid", pid, "err", err)
	}
	p.mu.Lock()
	if !p.reaped {
		killTree(p.pid, p.os)
	}
	cg := p.cg
	p.mu.Unlock()
	if cg != nil { // double-forked descendants too
		// From another thread: this one is confined, and Landlock
		// refuses it the cgroup's files (the kill found nothing).
		done := make(chan struct{})
		go func() {
			defer close(done)
			cg.Kill()
		}()
		<-done
	}
	close(p.exited)
	t := time.NewTimer(pipeGrace)
	defer t.Stop()
	select {
	case <-r.waiting:
	case <-t.C:
		p.pool.hostLog.Warn("plugin exited but its output stays open (a descendant left its process group); closing it", "pid", pid)
		r.stdout.Close()
		r.stderr.Close()
	}
}

func (r *procRunner) Wait(context.Context) error {
	p := r.p
	close(r.waiting)
	if haveExitWatch {
		<-p.exited
	}
	p.mu.Lock()
	p.reaped = true // from here on the pid may be reused
	p.mu.Unlock()
	err := r.cmd.Wait()
	p.mu.Lock()
	p.state = r.cmd.ProcessState
	p.mu.Unlock()
	if !haveExitWatch {
		close(p.exited)
	}
	return err
}

func (r *procRunner) Kill(context.Context) error {
	r.p.killGroup()
	return nil
}

func (r *procRunner) ID() string {
	if pid := r.p.pidValue(); pid != 0 {
		return strconv.Itoa(pid)
	}
	return ""
}

func (r *procRunner) Name() string          { return r.p.pool.cfg.Path }
func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }

func (r *procRunner) Diagnose(context.Context) string {
	return "a p2pc plugin calls sdk.Serve in main and writes nothing to stdout before it"
}

// PluginToHost and HostToPlugin: host and plugin share one network and
// file system namespace.
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
