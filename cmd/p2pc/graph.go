package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/webui"
	"github.com/p2pc/p2pc/spec"
)

// runGraph is `p2pc run` of a job with stages: its stages at once, each a
// job of its own in OUT/stages/<name>, with one report.json for the
// graph (package job's graph.go).
func (c *RunCmd) runGraph(ctx context.Context, cancel context.CancelFunc, g *Globals, js *spec.Job, slots int, taskUser *sandbox.User, tr *phaseTrace) error {
	sw, stop, err := c.runSwarm(ctx, g, tr)
	if err != nil {
		return err
	}
	defer stop()
	var live *job.GraphLive
	if c.UI != "" {
		live = job.NewGraphLive()
		out := js.Output
		if c.Out != "" {
			out = c.Out
		}
		peers := &runPeers{self: sw.name, member: sw.member, slots: slots, live: live, members: sw.members, conf: confinement()}
		stopUI, err := startUI(ctx, g, c.UI, webui.DefaultRunAddr, webui.Config{
			Title: "job " + js.Name, Job: graphUI{live}, Swarm: peers, OutDir: out, Cancel: cancel})
		if err != nil {
			return err
		}
		defer stopUI()
	}
	var tasks int
	for _, st := range js.Stages {
		tasks += st.Job.Tasks.Len()
	}
	if tasks*coordBytesPerTask > bigHeap {
		// Its stages run at once: their states add up, as a flat job's
		// of all their tasks would.
		expectBigHeap()
	}
	start := time.Now()
	rep, runErr := job.RunGraph(ctx, js, job.GraphOptions{
		Prepare: c.prepareOptions(g),
		Run:     c.runOptions(g, sw, slots, taskUser, tr),
		Live:    live,
		Stage: func(name string, index, total, tasks int) (job.Events, func()) {
			// The stages run at once: plain lines, one stage a line, not
			// bars that would draw over each other.
			prog := newProgress(os.Stderr, fmt.Sprintf("%s/%s (stage %d of %d)", js.Name, name, index, total), false)
			return traceEvents(prog, tr), prog.Finish
		},
	})
	tr.mark("job run returned")
	if rep != nil {
		if c.JSON {
			// The report file lists every task; rep only those that did
			// not finish.
			out := js.Output
			if c.Out != "" {
				out = c.Out
			}
			if err := copyFile(os.Stdout, filepath.Join(out, "report.json")); err != nil {
				return withCode(exitInternal, fmt.Errorf("print report: %w", err))
			}
		}
		printGraphSummary(os.Stderr, rep, time.Since(start))
	}
	if runErr != nil {
		return classifyJobErr(ctx.Err(), runErr)
	}
	return nil
}

// printGraphSummary says how each stage of a graph ended.
func printGraphSummary(w io.Writer, g *job.GraphReport, took time.Duration) {
	var done, total int
	for _, s := range g.Stages {
		done, total = done+s.Done, total+s.Tasks
	}
	fmt.Fprintf(w, "job %s %s: %d of %d tasks done in %d stages, in %s\n", g.Name, g.State, done, total, len(g.Stages), took.Round(time.Millisecond))
	for _, s := range g.Stages {
		parts := []string{fmt.Sprintf("%d of %d done", s.Done, s.Tasks)}
		if s.Failed > 0 {
			parts = append(parts, fmt.Sprintf("%d failed", s.Failed))
		}
		if s.Blocked > 0 {
			parts = append(parts, fmt.Sprintf("%d blocked", s.Blocked))
		}
		parts = append(parts, fmt.Sprintf("%d ran, %d reused", s.Ran, s.Reused))
		fmt.Fprintf(w, "  stage %s: %s\n", s.Name, strings.Join(parts, ", "))
	}
	shown := 0
	for _, t := range g.Tasks {
		if t.State == "failed" || t.State == job.BlockedState {
			if shown == shownFailures {
				break
			}
			fmt.Fprintf(w, "  %s %s/%s: %s\n", t.State, t.Stage, t.ID, t.Error)
			shown++
		}
	}
}

// copyFile copies the file at path to w.
func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
