package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// forkStatus is the status of a job whose tasks spawn: a line per round,
// from each round's job database (OUT/rounds/<n>/job.db) and the tree's
// report.json.
type forkStatus struct {
	Name   string        `json:"name"`
	State  string        `json:"state"`
	Tasks  int           `json:"tasks,omitempty"` // the tree's, once its run ended
	Rounds []roundStatus `json:"rounds"`
}

type roundStatus struct {
	Round  int           `json:"round"`
	Status *jobdb.Status `json:"status,omitempty"`
}

// statusFork prints the status of the fork tree in c.Out; ok is false when
// c.Out holds no fork tree (then nothing is printed).
func (c *StatusCmd) statusFork(g *Globals) (ok bool, err error) {
	if _, err := os.Stat(filepath.Join(c.Out, jobdb.FileName)); err == nil {
		return false, nil
	}
	entries, err := os.ReadDir(filepath.Join(c.Out, "rounds"))
	if err != nil {
		return false, nil
	}
	fs := forkStatus{Name: filepath.Base(c.Out), State: report.StateInterrupted}
	rep, _, err := job.ReadForkReport(c.Out)
	if err != nil {
		return true, withCode(exitInternal, err)
	}
	if rep != nil {
		fs.Name, fs.State, fs.Tasks = rep.Name, rep.State, len(rep.Tasks)
	}
	if held, known := folderHeld(c.Out); known && held {
		fs.State, fs.Tasks = report.StateRunning, 0 // the report is the last run's
	}
	var rounds []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			rounds = append(rounds, n)
		}
	}
	sort.Ints(rounds)
	for _, n := range rounds {
		rs := roundStatus{Round: n}
		db, err := jobdb.OpenReadOnly(g.Ctx, filepath.Join(c.Out, "rounds", strconv.Itoa(n), jobdb.FileName))
		if err == nil {
			rs.Status, err = db.Status(g.Ctx, time.Now(), c.Window, c.Failures)
			db.Close()
			if err != nil {
				return true, withCode(exitInternal, err)
			}
			if rs.Status.State == report.StateRunning && fs.State != report.StateRunning {
				rs.Status.State = report.StateInterrupted // its run died with the tree's
			}
		}
		fs.Rounds = append(fs.Rounds, rs)
	}
	if c.JSON {
		if err := json.NewEncoder(os.Stdout).Encode(fs); err != nil {
			return true, withCode(exitInternal, err)
		}
	} else {
		printForkStatus(os.Stdout, &fs)
	}
	return true, stateExit(fs.State)
}

func printForkStatus(w io.Writer, fs *forkStatus) {
	fmt.Fprintf(w, "job %s %s: a fork tree, %d rounds", fs.Name, fs.State, len(fs.Rounds))
	if fs.Tasks > 0 {
		fmt.Fprintf(w, ", %d tasks", fs.Tasks)
	}
	fmt.Fprintln(w)
	for _, r := range fs.Rounds {
		if s := r.Status; s == nil {
			fmt.Fprintf(w, "  round %d: not started\n", r.Round)
		} else {
			fmt.Fprintf(w, "  round %d: %s, %d/%d done, %d failed, %d running, %d queued\n", r.Round, s.State, s.Done, s.Total, s.Failed, s.Running, s.Queued)
		}
	}
}
