package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// LogsCmd is `p2pc logs`: a task's attempts with their full errors (the
// plugin's stderr, a panic's whole stack), which the summary only
// excerpts.
type LogsCmd struct {
	Out  string `arg:"" help:"The job's output folder (where report.json is)." type:"path" placeholder:"OUT"`
	Task string `arg:"" help:"The task's ID, as the summary and report.json name it." placeholder:"TASK"`
}

// Run prints the task's state, why it failed, and each attempt.
func (c *LogsCmd) Run(g *Globals) error {
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
	rep, err := report.Read(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no job ran there (no %s)", out, report.FileName)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range rep.Tasks {
		if t.ID == id {
			return &taskLog{JobName: rep.Name, JobID: rep.JobID, Task: t}, nil
		}
		if len(ids) < 10 {
			ids = append(ids, t.ID)
		}
	}
	more := ""
	if len(rep.Tasks) > len(ids) {
		more = fmt.Sprintf(", … (%d in all)", len(rep.Tasks))
	}
	return nil, fmt.Errorf("job %s in %s has no task %q; its tasks: %s%s", rep.Name, out, id, strings.Join(ids, ", "), more)
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
