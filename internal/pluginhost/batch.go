package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/pluginpb"
)

// batchGrace is how long past its timeout a task of a batch may take
// before the host kills the process: the SDK ends the task's ctx at its
// timeout, and a task that honours it returns at once (outcome timeout,
// the process stays warm); one that ignores it is killed.
const batchGrace = 200 * time.Millisecond

// Result holding (SDK protocol 4): the plugin may send up to
// batchHoldResults results in one message, each held at most
// batchHoldFor while the tasks after it run, so that tasks of
// microseconds cost a message (a write, a read and the wake-ups on both
// ends) per many tasks. Results held when a process dies are lost with
// it and their tasks run again: after a crash in a batch the pool sends
// each result alone for batchHoldOff, so the next crash is pinned to its
// task as before.
const (
	batchHoldResults = 64
	batchHoldFor     = time.Millisecond
	batchHoldOff     = 30 * time.Second
)

// hold is the result holding the pool's next batch asks for.
func (pl *Pool) hold() pluginproto.Hold {
	if time.Now().UnixNano() < pl.noHoldUntil.Load() {
		return pluginproto.Hold{}
	}
	return pluginproto.Hold{MaxResults: batchHoldResults, For: batchHoldFor}
}

// BatchTask is one task of RunBatch.
type BatchTask struct {
	// Ctx is the task's own (its lease): when it ends while the task
	// runs, the task has batchGrace to end, then the process is killed.
	// A task whose Ctx ends before it starts still runs; the caller
	// ignores its result.
	Ctx  context.Context
	Req  *sdk.Request
	Host sdk.Host
}

// BatchResult is one task's result of RunBatch.
type BatchResult struct {
	// Res and Err are as Run returns them.
	Res        *sdk.Result
	Err        error
	Start, End time.Time
	// Clean: the task returned no files and left its work dir empty
	// (the plugin checked), so the next task may run there.
	Clean bool
}

// RunBatch runs tasks one after another in one warm process, through one
// plugin call when the plugin serves batches (pluginpb.BatchProtocol),
// and calls each, from this goroutine and in order, with every task's
// result as soon as it ends. Each task has its own timeout (the plugin
// ends its ctx; the host kills a process whose task overruns it by
// batchGrace), panic recovery and callbacks; one task's failure, timeout
// or crash is its own, with the outcome Run would give it.
//
// It returns how many tasks were reported: fewer than len(tasks) when
// the call ended early, after a task that left files in a work dir that
// a later task names, after the task whose process was lost, or because
// the plugin speaks only single calls (then one task runs per call). The
// caller collects what it must, empties the work dir and calls again
// with the rest; with alone, with the first of the rest alone: the
// process crashed during a batch, and the results in flight were lost
// with it, so which task crashed it is known only by running them again,
// the first alone (a task alone that crashes its process is crashed, as
// with Run).
func (pl *Pool) RunBatch(ctx context.Context, tasks []BatchTask, timeout time.Duration, each func(i int, r BatchResult)) (n int, alone bool) {
	if len(tasks) == 0 {
		return 0, false
	}
	if len(tasks) == 1 || !pl.batches(ctx) {
		t := tasks[0]
		// The task's start and end are the plugin's own (SDK protocol 4),
		// else from when it had a process (a start is not run time) to
		// its answer. The host's times include its round trip and the
		// process's wake-up, which the coordinator would take for the run
		// time of a tiny task when it sizes batches.
		var start, pstart, pend time.Time
		res, err := pl.call(t.Ctx, "run", t.Req.TaskID, timeout, func(ctx context.Context, c *pluginproto.Client) (*sdk.Result, error) {
			start = time.Now()
			res, s, e, err := c.RunTimed(ctx, t.Req, t.Host)
			pstart, pend = s, e
			return res, err
		})
		end := time.Now()
		switch {
		case !pstart.IsZero():
			start, end = pstart, pend
		case start.IsZero():
			start = end
		}
		each(0, BatchResult{Res: res, Err: err, Start: start, End: end})
		return 1, false
	}
	first := tasks[0].Req.TaskID
	p, err := pl.acquire(ctx, "run", first)
	if err != nil {
		now := time.Now()
		each(0, BatchResult{Err: err, Start: now, End: now})
		return 1, false
	}
	pl.stats.calls.Add(1)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The watchdog of the task that runs now: its timeout (plus grace)
	// or the end of its own ctx kills the process.
	var (
		mu  sync.Mutex
		cur int
		why error // ErrTimeout, or the task's ctx error
	)
	kill := func(i int, reason error) {
		mu.Lock()
		defer mu.Unlock()
		if cur == i && why == nil {
			why = reason
			cancel()
			p.killGroup()
		}
	}
	arm := func(i int) func() {
		if i >= len(tasks) {
			return func() {}
		}
		// A task whose own ctx ends (its lease revoked: another copy won)
		// has batchGrace to end first: a tiny task mostly does, and its
		// process stays warm (a confined process costs milliseconds to
		// start again); one still running then is killed.
		var (
			gmu   sync.Mutex
			grace *time.Timer
		)
		stopAfter := context.AfterFunc(tasks[i].Ctx, func() {
			gmu.Lock()
			defer gmu.Unlock()
			grace = time.AfterFunc(batchGrace, func() { kill(i, tasks[i].Ctx.Err()) })
		})
		stopCtx := func() {
			stopAfter()
			gmu.Lock()
			defer gmu.Unlock()
			if grace != nil {
				grace.Stop()
			}
		}
		if timeout <= 0 {
			return func() { stopCtx() }
		}
		// Running time: a frozen spell (--pause-when-busy) does not count.
		tctx, tcancel := withTaskTimeout(context.Background(), timeout+batchGrace)
		stopT := context.AfterFunc(tctx, func() { kill(i, ErrTimeout) })
		return func() { stopCtx(); stopT(); tcancel() }
	}
	calls := make([]pluginproto.BatchTask, len(tasks))
	for i, t := range tasks {
		calls[i] = pluginproto.BatchTask{Req: t.Req, Host: t.Host, Timeout: timeout}
	}
	disarm := arm(0)
	started := time.Now()
	err = p.task.RunBatch(callCtx, calls, pl.hold(), func(r pluginproto.BatchResult) {
		disarm()
		mu.Lock()
		if why != nil { // killed as the result came: the process is lost
			mu.Unlock()
			disarm = func() {}
			return
		}
		cur = r.Index + 1
		mu.Unlock()
		disarm = arm(r.Index + 1)
		started = r.End
		out := BatchResult{Res: r.Res, Start: r.Start, End: r.End, Clean: r.Clean}
		// What the task left running is killed when the call ends, not
		// here: by the time its result arrives the plugin runs the next
		// task, whose own processes a kill now would hit (see endTask
		// below).
		var te *sdk.TaskError
		switch {
		case r.TimedOut:
			pl.stats.timeouts.Add(1)
			out.Err = &Error{Op: "run", Plugin: pl.cfg.Path, Task: tasks[r.Index].Req.TaskID, PID: p.pidValue(), Kind: ErrTimeout,
				Err: fmt.Errorf("not done within %v: %w", timeout, r.Err)}
			out.Res = nil
		case errors.As(r.Err, &te):
			pl.stats.taskErrors.Add(1)
			limit := p.limitHit()
			out.Err = pl.limitError("run", te.TaskID, p, limit, r.Err)
		}
		n = r.Index + 1
		each(r.Index, out)
	})
	disarm()
	mu.Lock()
	cur = -1 // no watchdog fires from here on
	mu.Unlock()
	if err == nil && why == nil {
		// The call is over: what its tasks left running goes now, before
		// the process serves anything else (a batch's tasks are one job's;
		// within the call, a task's leftovers live on for at most the
		// rest of the batch, a few milliseconds of work).
		if p.endTask() {
			p.limitHit()
		}
		pl.release(p)
		return n, false
	}
	if err == nil {
		err = errors.New("killed")
	}
	if n == len(tasks) { // every task reported, then the stream broke
		p.shutdown()
		<-pl.slots
		return n, false
	}
	// The process is lost during task n: it is killed, that task gets
	// the error Run would give it, the rest did not run. A crash (or a
	// kill by a limit of its cgroup) is not blamed on task n: results
	// sent before it may have been lost with the process, and the culprit
	// a later task; n runs again, alone (see above).
	limit := p.limitHit()
	// Only the last task unreported: it is the one that was running.
	crashed := !pl.isClosed() && ctx.Err() == nil && why == nil && n < len(tasks)-1
	e := &Error{Op: "run", Plugin: pl.cfg.Path, Task: tasks[n].Req.TaskID, PID: p.pidValue(), Err: err}
	switch {
	case pl.isClosed():
		e.Kind = ErrClosed
		p.shutdown()
	case ctx.Err() != nil:
		e.Kind = ctx.Err()
		pl.stats.canceled.Add(1)
		p.shutdown()
	case errors.Is(why, ErrTimeout):
		e.Kind = ErrTimeout
		e.Err = fmt.Errorf("no answer within %v: %w", timeout, err)
		pl.stats.timeouts.Add(1)
		p.shutdown()
		pl.hostLog.Info("plugin killed: task timed out", "task", e.Task, "pid", e.PID, "timeout", timeout)
	case why != nil:
		e.Kind = why
		pl.stats.canceled.Add(1)
		p.shutdown()
	default:
		e.Kind = ErrCrashed
		pl.stats.crashes.Add(1)
		p.shutdownAfterCrash()
		if limit != nil {
			e.Kind = limit
		}
	}
	p.finishError(e)
	if e.Kind == ErrCrashed {
		pl.hostLog.Warn("plugin crashed", "op", "run", "task", e.Task, "pid", e.PID, "status", e.Status, "err", plain.Error(err))
	}
	<-pl.slots
	if crashed {
		pl.noHoldUntil.Store(time.Now().Add(batchHoldOff).UnixNano())
		pl.hostLog.Debug("plugin lost in a batch; the first task not reported runs again, alone", "task", e.Task, "err", e)
		return n, true
	}
	each(n, BatchResult{Err: e, Start: started, End: time.Now()})
	return n + 1, false
}

// batches reports whether the plugin serves RunBatch (its SDK protocol,
// from the cached Describe).
func (pl *Pool) batches(ctx context.Context) bool {
	info, err := pl.Describe(ctx)
	return err == nil && info.SDKProtocol >= pluginpb.BatchProtocol
}
