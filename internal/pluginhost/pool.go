package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pc/p2pc/internal/plain"

	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Pool runs calls in up to size warm processes of one plugin executable,
// one call per process at a time. Processes start on demand and are
// reused until they crash, overrun a timeout, lose their caller's ctx,
// or the pool is closed. All methods are safe for concurrent use.
type Pool struct {
	cfg          Config
	size         int
	startTimeout time.Duration
	hostLog      *slog.Logger // component=pluginhost
	plugLog      *slog.Logger // component=plugin: the plugin's own output

	slots   chan struct{} // a token per process that may run
	closing chan struct{} // closed by Close

	mu     sync.Mutex // a leaf: released before a proc's lock is taken
	closed bool
	idle   []*proc            // warm, not in a call; most recently used last
	all    map[*proc]struct{} // started, starting or shutting down
	// starting counts the starts in flight (at most maxStarting); changed
	// is closed (and replaced) when a process goes idle, a start ends or
	// a process is gone: the callers waiting in acquire look again.
	starting    int
	maxStarting int
	changed     chan struct{}
	// failed is the last start's error, at failedAt: the callers that
	// waited for it get it (acquire).
	failed   error
	failedAt time.Time
	// startCost is what a start takes (a moving mean of the measured
	// ones; 0: none yet): how long a caller waits for a busy process
	// before it starts one.
	startCost time.Duration
	spawns    sync.WaitGroup // spawn goroutines
	dirs      dirs
	info      *pluginproto.PluginInfo
	// verified is the identity of the executable last checked against
	// the checksum (see checkExecutable).
	verified string

	// granted: the task user was given the policy's paths (Grant).
	grantOnce sync.Once
	grantErr  error
	// conf is the confinement every process of the pool shares (its
	// private network namespace), made with the grant.
	conf *sandbox.Confinement

	// confined is the confinement the first start got (logged once).
	confinedOnce sync.Once
	confined     sandbox.Status

	cgroupOnce sync.Once // the warning that there are no cgroups

	closeOnce sync.Once
	closeErr  error

	// noHoldUntil: batches send each result alone until then (unix
	// nanoseconds; set by a crash in a batch, see batchHoldOff).
	noHoldUntil atomic.Int64

	stats struct {
		starts, startFailures, calls, reuses, taskErrors,
		crashes, timeouts, canceled atomic.Int64
	}
}

// NewPool returns a pool of up to size processes (at least 1) of the
// plugin cfg names. Nothing starts until the first call; configuration
// errors surface there.
func NewPool(cfg Config, size int) *Pool {
	if size < 1 {
		size = 1
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	name := filepath.Base(cfg.Path)
	maxStarting := cfg.MaxStarting
	if maxStarting <= 0 {
		maxStarting = runtime.NumCPU()
	}
	return &Pool{
		cfg:          cfg,
		size:         size,
		startTimeout: cfg.StartTimeout,
		hostLog:      l.With("component", "pluginhost", "plugin", name),
		plugLog:      l.With("component", "plugin", "plugin", name),
		slots:        make(chan struct{}, size),
		closing:      make(chan struct{}),
		all:          make(map[*proc]struct{}),
		maxStarting:  maxStarting,
		changed:      make(chan struct{}),
		verified:     cfg.Verified,
	}
}

// Run runs one task in a warm process, starting one if none is idle and
// fewer than size run (else it waits for one, honouring ctx). timeout > 0
// bounds the call (not the start, which StartTimeout bounds).
//
// A task's own failure is returned as the *sdk.TaskError and the process
// stays warm. Any other failure is an *Error after which the process is
// gone: ErrCrashed, ErrTimeout, ctx.Err(), ErrClosed, or a start error
// (ErrNotPlugin, ErrChecksum, a missing executable). Retrying is the
// caller's decision.
func (pl *Pool) Run(ctx context.Context, req *sdk.Request, host sdk.Host, timeout time.Duration) (*sdk.Result, error) {
	return pl.call(ctx, "run", req.TaskID, timeout, func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error) {
		return c.Run(ctx, req, host)
	})
}

// Reduce runs the plugin's reduce step like Run runs a task.
func (pl *Pool) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host, timeout time.Duration) (*sdk.Result, error) {
	return pl.call(ctx, "reduce", "", timeout, func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error) {
		return c.Reduce(ctx, req, host)
	})
}

// Describe asks the plugin what it is, starting a process if none runs:
// the check that Config names a working plugin. The answer is cached (the
// checksum pins the executable).
func (pl *Pool) Describe(ctx context.Context) (pluginproto.PluginInfo, error) {
	pl.mu.Lock()
	info := pl.info
	pl.mu.Unlock()
	if info != nil {
		return *info, nil
	}
	var got pluginproto.PluginInfo
	_, err := pl.call(ctx, "describe", "", pl.startTimeout, func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error) {
		var err error
		got, err = c.Describe(ctx)
		return nil, err
	})
	if err != nil {
		return pluginproto.PluginInfo{}, err
	}
	pl.mu.Lock()
	pl.info = &got
	pl.mu.Unlock()
	return got, nil
}

// Stats returns the pool's counters.
func (pl *Pool) Stats() Stats {
	pl.mu.Lock()
	live := len(pl.all)
	pl.mu.Unlock()
	s := &pl.stats
	return Stats{
		Starts:        s.starts.Load(),
		StartFailures: s.startFailures.Load(),
		Calls:         s.calls.Load(),
		WarmReuses:    s.reuses.Load(),
		TaskErrors:    s.taskErrors.Load(),
		Crashes:       s.crashes.Load(),
		Timeouts:      s.timeouts.Load(),
		Canceled:      s.canceled.Load(),
		Live:          live,
	}
}

// Pids lists the process IDs of the pool's live processes (a watcher
// reads their CPU and memory).
func (pl *Pool) Pids() []int {
	pl.mu.Lock()
	procs := make([]*proc, 0, len(pl.all))
	for p := range pl.all {
		procs = append(procs, p)
	}
	pl.mu.Unlock()
	var out []int
	for _, p := range procs {
		p.mu.Lock()
		if p.pid != 0 && !p.reaped {
			out = append(out, p.pid)
		}
		p.mu.Unlock()
	}
	return out
}

// Close kills every process (with its process group), waits for them and
// for every goroutine the pool started, and removes the private
// directories. Calls in progress return ErrClosed. Close is idempotent;
// concurrent calls all wait for the first to finish.
func (pl *Pool) Close() error {
	pl.closeOnce.Do(func() {
		pl.mu.Lock()
		pl.closed = true
		close(pl.closing)
		procs := make([]*proc, 0, len(pl.all))
		for p := range pl.all {
			procs = append(procs, p)
		}
		pl.idle = nil
		d := pl.dirs
		pl.mu.Unlock()

		for _, p := range procs {
			p.killGroup()
		}
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(p.shutdown)
		}
		wg.Wait()
		pl.spawns.Wait() // each ends once its process is killed
		pl.mu.Lock()
		conf := pl.conf
		pl.mu.Unlock()
		if conf != nil { // no start after closed: every one has ended
			pl.closeErr = conf.Close()
		}
		for _, o := range d.owned {
			pl.closeErr = errors.Join(pl.closeErr, o.Remove())
		}
		if len(procs) > 0 {
			pl.hostLog.Debug("plugin pool closed", "killed", len(procs))
		}
	})
	return pl.closeErr
}

func (pl *Pool) isClosed() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.closed
}

// forget drops a process that is down.
func (pl *Pool) forget(p *proc) {
	pl.mu.Lock()
	delete(pl.all, p)
	pl.notifyLocked()
	pl.mu.Unlock()
}

type callFunc func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error)

func (pl *Pool) call(ctx context.Context, op, taskID string, timeout time.Duration, fn callFunc) (*sdk.Result, error) {
	p, err := pl.acquire(ctx, op, taskID)
	if err != nil {
		return nil, err
	}
	pl.stats.calls.Add(1)
	base, endGrace := ctx, func() {}
	if op == "run" {
		// A task whose caller gives up (its lease revoked: another copy
		// won) has batchGrace to end: a tiny task mostly does, and its
		// process stays warm (a confined process costs milliseconds to
		// start again).
		base, endGrace = afterGrace(ctx, batchGrace)
	}
	defer endGrace()
	callCtx, cancel := base, context.CancelFunc(func() {})
	if timeout > 0 {
		callCtx, cancel = withTaskTimeout(base, timeout) // frozen time does not count
	}
	res, err := fn(callCtx, p.task)
	// callCtx carries no deadline (see withTaskTimeout); ctx may, and
	// its timer may be late: ask the clock too.
	callerDone, overrun := expired(ctx), timeout > 0 && expired(callCtx)
	cancel()

	var te *sdk.TaskError
	switch {
	case err == nil:
		// A task that succeeded and started no process hit no limit
		// (a child killed for memory, a refused fork): the counters
		// are read only when it did (limits.go).
		if p.endTask() {
			p.limitHit()
		}
		pl.release(p)
		return res, nil
	case errors.As(err, &te) && !callerDone && !overrun:
		pl.stats.taskErrors.Add(1)
		limit := p.limitHit()
		p.endTask()
		pl.release(p)
		return nil, pl.limitError(op, taskID, p, limit, err)
	}
	limit := p.limitHit() // limits.go

	// The process is lost: whatever it was doing, it is killed.
	e := &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, PID: p.pidValue(), Err: err}
	switch {
	case pl.isClosed():
		e.Kind = ErrClosed
		p.shutdown()
	case callerDone:
		e.Kind = ctx.Err()
		if e.Kind == nil { // its deadline passed, its timer is late
			e.Kind = context.DeadlineExceeded
		}
		pl.stats.canceled.Add(1)
		p.shutdown()
	case overrun:
		e.Kind = ErrTimeout
		e.Err = fmt.Errorf("no answer within %v: %w", timeout, err)
		pl.stats.timeouts.Add(1)
		p.shutdown()
		pl.hostLog.Info("plugin killed: task timed out", "task", taskID, "pid", e.PID, "timeout", timeout)
	default:
		e.Kind = ErrCrashed
		pl.stats.crashes.Add(1)
		p.shutdownAfterCrash()
		if limit != nil { // killed by its cgroup, not a crash
			e.Kind = limit
		}
	}
	p.finishError(e)
	if e.Kind == ErrCrashed {
		pl.hostLog.Warn("plugin crashed", "op", op, "task", taskID, "pid", e.PID, "status", e.Status, "err", plain.Error(err))
		pl.hostLog.Debug("plugin crashed", "task", taskID, "err", err)
	}
	<-pl.slots
	return nil, e
}

// expired: ctx is done, or its deadline has passed.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// acquire takes a slot and a process: an idle warm one, or a new one.
//
// A caller that finds no idle process takes whichever comes first: a
// process another call releases, or a started one (its own or another
// caller's). It starts one itself (at most one of its own at a time, at
// most Config.MaxStarting in the pool at once, at most size processes in
// all) when nothing else can serve it (no process at all), or once it
// has waited as long as a start takes (startCost, measured; while the
// pool's first starts are in flight it waits for them). Waiting longer
// than that for a busy process would cost more than a start, waiting
// less costs less (the ski-rental rule: at most twice the better
// choice). So a tiny task never waits for a start while a warm process
// frees in a fraction of a millisecond, and a burst of tiny tasks on a
// pool smaller than the burst does not start a process per task: a start
// costs milliseconds of CPU, and many at once on fewer cores hold up
// every waiting task until the last is done. A long task waits at
// most about one start's time before its own process starts. The rule
// reads nothing of the machine but the pool's own measured starts: how
// busy other programs keep the CPUs does not change how many processes
// a job gets. A process
// started for a caller that took another goes to the idle list, warm for
// the next.
func (pl *Pool) acquire(ctx context.Context, op, taskID string) (*proc, error) {
	closedErr := func() error {
		return &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, Kind: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, Kind: err}
	}
	select {
	case pl.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, Kind: ctx.Err()}
	case <-pl.closing:
		return nil, closedErr()
	}
	var (
		mine     *proc      // the process this caller started, if any
		mineDone chan error // its start's outcome; nil: none in flight
		arrived  = time.Now()
		patience *time.Timer
	)
	for {
		pl.mu.Lock()
		if pl.closed {
			pl.mu.Unlock()
			<-pl.slots
			return nil, closedErr()
		}
		if n := len(pl.idle); n > 0 {
			p := pl.idle[n-1]
			pl.idle = pl.idle[:n-1]
			pl.mu.Unlock()
			if p.hasExited() { // died while idle
				p.shutdown()
				pl.hostLog.Warn("idle plugin process died", "pid", p.pidValue(), "status", p.status(), "stderr", p.tail.get())
				continue
			}
			if p != mine {
				pl.stats.reuses.Add(1)
			}
			return p, nil
		}
		if mineDone == nil && len(pl.all) == 0 && pl.failedAt.After(arrived) {
			// The start it waited for failed, and nothing else runs:
			// that start's error is its answer (another start would
			// most likely fail alike, after as long).
			err := pl.failed
			pl.mu.Unlock()
			<-pl.slots
			return nil, errorForTask(err, taskID)
		}
		var patient <-chan time.Time // when this caller may start one
		if mineDone == nil && pl.starting < pl.maxStarting && len(pl.all) < pl.size {
			switch wait := pl.startDelayLocked(time.Since(arrived)); {
			case wait == 0:
				p, err := pl.newProcLocked()
				if err != nil {
					pl.mu.Unlock()
					<-pl.slots
					return nil, err
				}
				pl.starting++
				mine, mineDone = p, make(chan error, 1)
				pl.spawns.Add(1)
				go pl.spawn(ctx, p, mineDone)
			case wait > 0:
				if patience == nil {
					patience = time.NewTimer(wait)
					defer patience.Stop()
				} else {
					patience.Reset(wait)
				}
				patient = patience.C
			}
		}
		changed := pl.changed
		pl.mu.Unlock()
		select {
		case <-changed:
		case <-patient:
		case err := <-mineDone:
			mineDone = nil
			if err != nil {
				<-pl.slots
				return nil, errorForTask(err, taskID)
			}
		case <-ctx.Done():
			<-pl.slots
			return nil, &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, Kind: ctx.Err()}
		case <-pl.closing:
			<-pl.slots
			return nil, closedErr()
		}
	}
}

// Warm starts a process in the background if the pool has none (and none
// is starting), so that the first call finds it warm and the pool knows
// what a start costs (see acquire): a node calls it once the job's plugin
// is local, and the start overlaps the first lease's way to the node. A
// peer that got no task in a job's first run thus serves a rerun of the
// job without a start in its path. A failed start is only logged at debug
// level: the next call starts again and returns the error.
func (pl *Pool) Warm() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || len(pl.all) > 0 {
		return
	}
	p, err := pl.newProcLocked()
	if err != nil {
		pl.hostLog.Debug("plugin warm start failed", "err", err)
		return
	}
	pl.starting++
	pl.spawns.Add(1)
	go pl.spawn(context.Background(), p, make(chan error, 1))
}

// startDelayLocked says when a caller that has waited for a process
// for waited may start one: 0 now, > 0 after that much more, < 0 not until
// something changes (the pool's first starts are in flight: no start has
// been timed, and the first process up serves it or times one).
func (pl *Pool) startDelayLocked(waited time.Duration) time.Duration {
	switch {
	case len(pl.all) == 0 && pl.starting > 0:
		// A start failed: its process is gone, and spawn is about to
		// record its error, which answers the callers that waited.
		return -1
	case len(pl.all) == 0: // nothing else can serve it
		return 0
	case pl.startCost == 0:
		return -1
	}
	if d := pl.startCost - waited; d > 0 {
		return d
	}
	return 0
}

// errorForTask is a start's error as the call of taskID returns it: a
// copy naming the task (the error may be every waiting caller's).
func errorForTask(err error, taskID string) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Task = taskID
		return &c
	}
	return err
}

// notifyLocked wakes the callers waiting in acquire: a process went idle,
// a start ended or a process is gone.
func (pl *Pool) notifyLocked() {
	close(pl.changed)
	pl.changed = make(chan struct{})
}

// release returns a healthy process to the idle list and frees its slot.
func (pl *Pool) release(p *proc) {
	pl.mu.Lock()
	if pl.closed || p.hasExited() {
		pl.mu.Unlock()
		p.shutdown()
	} else {
		pl.idle = append(pl.idle, p)
		pl.notifyLocked()
		pl.mu.Unlock()
	}
	<-pl.slots
}

// Verify asks the plugin to check an output (sdk.Verifier). It returns nil
// when the plugin accepts it, an error wrapping pluginproto.ErrRejected when it
// rejects it, and other errors as Run does.
func (pl *Pool) Verify(ctx context.Context, req *sdk.VerifyRequest, timeout time.Duration) error {
	var verdict error
	_, err := pl.call(ctx, "verify", req.TaskID, timeout, func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error) {
		verdict = c.Verify(ctx, req)
		if errors.Is(verdict, pluginproto.ErrRejected) {
			return nil, nil
		}
		return nil, verdict
	})
	if err != nil {
		return err
	}
	return verdict
}
