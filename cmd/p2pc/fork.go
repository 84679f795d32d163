package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/spec"
)

// runFork is `p2pc run` of a job whose tasks spawn: round after round,
// each a job of its own in OUT/rounds/<n>, with one report.json for the
// tree (package job's fork.go).
func (c *RunCmd) runFork(ctx context.Context, g *Globals, js *spec.Job, slots int, taskUser *sandbox.User, tr *phaseTrace) error {
	if c.UI != "" {
		return withCode(exitBadInput, errors.New("--ui: the web view does not show a job whose tasks spawn yet; OUT/report.json has its tree"))
	}
	sw, stop, err := c.runSwarm(ctx, g, tr)
	if err != nil {
		return err
	}
	defer stop()
	start := time.Now()
	rep, runErr := job.RunFork(ctx, js, job.ForkOptions{
		Prepare: c.prepareOptions(g),
		Run:     c.runOptions(g, sw, slots, taskUser, tr),
		Round: func(round, tasks int) (job.Events, func()) {
			prog := newProgress(os.Stderr, fmt.Sprintf("%s (round %d)", js.Name, round), !c.NoProgress)
			return traceEvents(prog, tr), prog.Finish
		},
	})
	tr.mark("job run returned")
	if rep != nil {
		if c.JSON {
			if err := printJSON(rep); err != nil {
				return withCode(exitInternal, fmt.Errorf("print report: %w", err))
			}
		}
		printForkSummary(os.Stderr, rep, time.Since(start))
	}
	if runErr != nil {
		return classifyJobErr(ctx.Err(), runErr)
	}
	return nil
}

// printForkSummary says how a fork tree ended: its tasks, its rounds and
// the first failures.
func printForkSummary(w io.Writer, f *job.ForkReport, took time.Duration) {
	var done, ran, reused, depth int
	for _, t := range f.Tasks {
		if t.State == report.TaskDone {
			done++
		}
		depth = max(depth, t.Depth)
	}
	for _, r := range f.Rounds {
		ran, reused = ran+r.Ran, reused+r.Reused
	}
	fmt.Fprintf(w, "job %s %s: %d of %d tasks done, tree depth %d, in %d rounds (%d calls ran, %d reused), in %s\n",
		f.Name, f.State, done, len(f.Tasks), depth, len(f.Rounds), ran, reused, took.Round(time.Millisecond))
	shown := 0
	for _, t := range f.Tasks {
		if t.State == report.TaskFailed {
			if shown == shownFailures {
				break
			}
			fmt.Fprintf(w, "  failed %s: %s\n", t.ID, t.Error)
			shown++
		}
	}
}

// prepareOptions are the PrepareOptions of the run's flags.
func (c *RunCmd) prepareOptions(g *Globals) job.PrepareOptions {
	return job.PrepareOptions{
		OutDir:   c.Out,
		CacheDir: filepath.Join(g.Data, "plugins"),
		Force:    c.Force,
		Version:  version,
		Logger:   g.Logger,
	}
}

// runSwarm starts the run's swarm; stop stops it.
func (c *RunCmd) runSwarm(ctx context.Context, g *Globals, tr *phaseTrace) (sw *submitterSwarm, stop func(), err error) {
	sw, err = startSwarm(ctx, g, c, tr)
	if err != nil {
		return nil, nil, err
	}
	tr.mark("swarm started")
	return sw, func() {
		sw.stop()
		tr.mark("swarm stopped")
	}, nil
}
