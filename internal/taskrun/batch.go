package taskrun

import (
	"context"
	"errors"

	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Item is one attempt of a batch with its own ctx (its lease): ending it
// stops that attempt only (outcome canceled).
type Item struct {
	Ctx context.Context
	Attempt
}

// RunBatch runs items through as few plugin calls as it can, one after
// another in the slot's work folder, and calls done, in order and from
// this goroutine, with each item's output as soon as it ends: each item's
// outcome, timeout, staging and digest are as Run gives them. work returns
// the slot's empty work folder; it is called before every plugin call,
// and a new call follows a task that left files there (the plugin runs
// the next task of a batch in the same folder only while it stays empty)
// or whose process was lost. clean tells work that the folder is known
// empty (the last task run there was seen to leave it so, and its call
// ended): it need not look. RunBatch returns the same for the folder as
// the last call left it. Unless the items name a Stage each, done
// must be finished with the output's Stage (remove it) before it
// returns: the next output is staged there.
// ctx ending (the session over) cancels the items not yet run.
func RunBatch(ctx context.Context, pool *pluginhost.Pool, items []Item, work func(clean bool) (string, error), done func(i int, out Output)) (clean bool) {
	off := 0
	alone := false // run the next item alone (pluginhost.Pool.RunBatch)
	for off < len(items) {
		if err := ctx.Err(); err != nil {
			for i := off; i < len(items); i++ {
				done(i, Output{Outcome: report.OutcomeCanceled, Err: err})
			}
			return clean
		}
		// Items whose lease ended before they started are not sent.
		for off < len(items) && items[off].Ctx.Err() != nil {
			done(off, Output{Outcome: report.OutcomeCanceled, Err: items[off].Ctx.Err()})
			off++
		}
		rest := items[off:]
		if len(rest) == 0 {
			return clean
		}
		if alone {
			rest = rest[:1]
		}
		dir, err := work(clean)
		clean = false // until a task is seen to leave it empty
		if err != nil {
			for i := off; i < len(items); i++ {
				done(i, Output{Outcome: report.OutcomeLost, Err: err})
			}
			return false
		}
		tasks := make([]pluginhost.BatchTask, len(rest))
		for i, it := range rest {
			tasks[i] = pluginhost.BatchTask{Ctx: it.Ctx, Host: it.Host, Req: &sdk.Request{
				JobID: it.JobID, TaskID: it.TaskID, Attempt: it.Attempt.Attempt,
				Params: it.Params, Inputs: it.Inputs, WorkDir: dir,
			}}
		}
		base := off
		// One timeout per batch: a job's tasks share it.
		var n int
		n, alone = pool.RunBatch(ctx, tasks, rest[0].Timeout, func(i int, r pluginhost.BatchResult) {
			it := rest[i]
			err := r.Err
			// The plugin looked at the folder after the task (a batch);
			// else the folder of a task that returned no files and whose
			// process lives on is looked at here: one directory read (not
			// a walk for the disk limit), and the next call's work need
			// not look again.
			var te *sdk.TaskError
			warm := r.Err == nil || errors.As(r.Err, &te)
			clean = r.Clean || warm && (r.Res == nil || len(r.Res.Files) == 0) && EmptyDir(dir)
			if clean {
				err = checkDiskClean(it.Disk, err) // nothing left behind to measure
			} else {
				err = checkDisk(dir, it.Disk, err)
			}
			var out Output
			if err == nil {
				stage := it.Stage
				if stage == "" {
					stage = dir + ".out"
				}
				out, err = collectTo(dir, stage, r.Res, it.InlineMax, it.Tamper)
			}
			out.Outcome = pluginhost.Classify(it.Ctx, err)
			out.Err = err
			out.Start, out.End = r.Start, r.End
			done(base+i, out)
		})
		off += n
		if alone {
			clean = false // the process was lost during a task not reported
		}
	}
	return clean
}
