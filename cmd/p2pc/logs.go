package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// LogsCmd is `p2pc logs`: a task's attempts with their full errors (the
// plugin's stderr, a panic's whole stack), which the summary only
// excerpts.
type LogsCmd struct {
	Out  string `arg:"" help:"The job's output folder (where report.json is)." type:"path" placeholder:"OUT"`
	Task string `arg:"" optional:"" help:"The task's ID, as the summary and report.json name it (without it: a list of the job's task IDs, failed ones first)." placeholder:"TASK"`
}

// Run prints the task's state, why it failed, and each attempt.
func (c *LogsCmd) Run(g *Globals) error {
	if err := graphFolder("logs", c.Out); err != nil {
		return err
	}
	if c.Task == "" {
		return withCode(exitBadInput, whichTask(c.Out))
	}
	tl, err := readTaskLog(c.Out, c.Task)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	printTaskLog(os.Stdout, tl)
	return nil
}

// taskLog is what `p2pc logs` shows of one task.
type taskLog struct {
	JobName, JobID string
	Task           report.Task
}

// readTaskLog reads task id's record from the job state in the output
// folder out: for now report.json. It is the one place `p2pc logs` reads
// job state.
func readTaskLog(out, id string) (*taskLog, error) {
	rep, err := jobdb.ReadReport(context.Background(), out) // job.db, else an older run's report.json
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no job ran there (no %s or %s)", out, jobdb.FileName, report.FileName)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range rep.Tasks {
		if t.ID == id {
			return &taskLog{JobName: rep.Name, JobID: rep.JobID, Task: t}, nil
		}
	}
	return nil, fmt.Errorf("job %s in %s has no task %q; its tasks: %s", rep.Name, out, id, taskIDs(rep))
}

// whichTask is the error of `p2pc logs OUT` without a task: what to give,
// and the IDs to choose from.
func whichTask(out string) error {
	usage := "logs: which task? Give its ID after the output folder: p2pc logs OUT TASK"
	rep, err := jobdb.ReadReport(context.Background(), out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s; and %s holds no job (no %s or %s)", usage, out, jobdb.FileName, report.FileName)
	case err != nil:
		return fmt.Errorf("%s (%w)", usage, err)
	}
	return fmt.Errorf("%s; job %s in %s has tasks %s", usage, rep.Name, out, taskIDs(rep))
}

// taskIDs lists up to ten of the job's task IDs, its failed tasks first:
// "a, b, … (200 in all)".
func taskIDs(rep *report.Report) string {
	var failed, ids []string
	for _, t := range rep.Tasks {
		if t.State == report.TaskFailed && len(failed) < 10 {
			failed = append(failed, t.ID)
		}
		if len(ids) < 10 {
			ids = append(ids, t.ID)
		}
	}
	list := func(ids []string, n int) string {
		s := strings.Join(ids, ", ")
		if n > len(ids) {
			s += fmt.Sprintf(", … (%d in all)", n)
		}
		return s
	}
	if len(failed) > 0 {
		return fmt.Sprintf("%s; failed: %s", list(ids, len(rep.Tasks)), list(failed, rep.Summary.Failed))
	}
	return list(ids, len(rep.Tasks))
}

func printTaskLog(w io.Writer, tl *taskLog) {
	t := tl.Task
	fmt.Fprintf(w, "task %s of job %s (%.12s): %s", t.ID, tl.JobName, tl.JobID, t.State)
	if t.Peer != "" {
		fmt.Fprintf(w, " on %s", t.Peer)
	}
	fmt.Fprintln(w)
	if n := len(t.Attempts); t.Error != "" && n > 0 && t.Attempts[n-1].Error == t.Error {
		headline, _ := report.Excerpt(t.Error)
		fmt.Fprintf(w, "why: %s (attempt %d, below)\n", headline, n)
	} else if t.Error != "" {
		fmt.Fprintf(w, "why: %s\n", t.Error)
	}
	if t.Verdict != "" {
		fmt.Fprintf(w, "verdict: %s\n", t.Verdict)
	}
	for i, a := range t.Attempts {
		peer := a.Peer
		if a.PeerID != "" {
			peer += " (" + a.PeerID + ")"
		}
		fmt.Fprintf(w, "\nattempt %d on %s, %s, took %s: %s\n", i+1, peer, a.Start.Format(time.RFC3339), a.End.Sub(a.Start).Round(time.Millisecond), a.Outcome)
		if a.Error != "" {
			for l := range strings.SplitSeq(strings.TrimRight(a.Error, "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
}
