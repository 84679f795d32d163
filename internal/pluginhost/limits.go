package pluginhost

import (
	"github.com/p2pc/p2pc/internal/sandbox"
)

// newCgroup makes the cgroup of a process about to start (nil when the
// machine gives none: logged once per pool, and p2pc join says so at
// start).
func (pl *Pool) newCgroup() *sandbox.Cgroup {
	if sandbox.Probe().Disabled {
		return nil
	}
	cg, err := sandbox.NewCgroup(pl.cfg.Limits)
	if err != nil {
		pl.cgroupOnce.Do(func() {
			pl.hostLog.Warn("plugin processes run without cgroups: processes, address space and file size capped by rlimits instead; no memory or lifetime limit for what they start", "err", err)
		})
		return nil
	}
	return cg
}

func (p *proc) cgroup() *sandbox.Cgroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cg
}

// limitHit says which limit of its cgroup the process hit during the
// call just ended (nil if none, or no cgroup).
func (p *proc) limitHit() error {
	if cg := p.cgroup(); cg != nil {
		return cg.Exceeded()
	}
	return nil
}

// endTask kills what the call's task (or a batch's tasks: RunBatch
// calls it when the call ends) left running in the warm process's
// cgroup: every process but the plugin itself (double-forked daemons
// included). It reports whether any was left: only then (or when a task
// failed) may a limit have been hit, so only then is it asked.
func (p *proc) endTask() (left bool) {
	cg := p.cgroup()
	if cg == nil {
		return false
	}
	left, err := cg.KillOthers(p.pidValue())
	if err != nil {
		p.pool.hostLog.Warn("kill what the task left running", "pid", p.pidValue(), "err", err)
	}
	return left
}

// limitError is the error of a task that failed with err after hitting
// limit (err itself when limit is nil): the limit is the reason, the
// task's own message the detail.
func (pl *Pool) limitError(op, taskID string, p *proc, limit, err error) error {
	if limit == nil {
		return err
	}
	return &Error{Op: op, Plugin: pl.cfg.Path, Task: taskID, PID: p.pidValue(), Kind: limit, Err: err}
}
