package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// graphStatus is the status of a job with stages: a line per stage, from
// each stage's job database (OUT/stages/<name>/job.db) and the graph's
// report.json. ok is false when OUT holds no such job.
type graphStatus struct {
	Name   string        `json:"name"`
	State  string        `json:"state"`
	Stages []stageStatus `json:"stages"`
}

type stageStatus struct {
	Name string `json:"name"`
	// Status is the stage's job database's (nil: no task of it started).
	Status  *jobdb.Status `json:"status,omitempty"`
	Blocked int           `json:"blocked"`
}

// statusGraph prints the status of the job with stages in c.Out; ok is
// false when c.Out holds no such job (then nothing is printed).
func (c *StatusCmd) statusGraph(g *Globals) (ok bool, err error) {
	if _, err := os.Stat(filepath.Join(c.Out, jobdb.FileName)); err == nil {
		return false, nil
	}
	if fi, err := os.Stat(filepath.Join(c.Out, "stages")); err != nil || !fi.IsDir() {
		return false, nil
	}
	rep, _, err := job.ReadGraphReport(c.Out)
	if err != nil {
		return true, withCode(exitInternal, err)
	}
	gs := graphStatus{Name: filepath.Base(c.Out), State: report.StateInterrupted}
	var names []string
	blocked := map[string]int{}
	if rep != nil {
		gs.Name, gs.State = rep.Name, rep.State
		for _, s := range rep.Stages {
			names = append(names, s.Name)
			blocked[s.Name] = s.Blocked
		}
	} else {
		entries, err := os.ReadDir(filepath.Join(c.Out, "stages"))
		if err != nil {
			return true, withCode(exitInternal, err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
	}
	if held, known := folderHeld(c.Out); known && held {
		gs.State, blocked = report.StateRunning, map[string]int{} // the report is the last run's
	}
	for _, name := range names {
		st := stageStatus{Name: name, Blocked: blocked[name]}
		db, err := jobdb.OpenReadOnly(g.Ctx, filepath.Join(c.Out, "stages", name, jobdb.FileName))
		if err == nil {
			st.Status, err = db.Status(g.Ctx, time.Now(), c.Window, c.Failures)
			db.Close()
			if err != nil {
				return true, withCode(exitInternal, err)
			}
		}
		gs.Stages = append(gs.Stages, st)
	}
	if c.JSON {
		if err := json.NewEncoder(os.Stdout).Encode(gs); err != nil {
			return true, withCode(exitInternal, err)
		}
	} else {
		printGraphStatus(os.Stdout, &gs)
	}
	return true, stateExit(gs.State)
}

func printGraphStatus(w io.Writer, gs *graphStatus) {
	fmt.Fprintf(w, "job %s %s: %d stages\n", gs.Name, gs.State, len(gs.Stages))
	for _, st := range gs.Stages {
		s := st.Status
		if s == nil {
			fmt.Fprintf(w, "  stage %s: not started", st.Name)
		} else {
			fmt.Fprintf(w, "  stage %s: %s, %d/%d done, %d failed, %d running, %d queued", st.Name, s.State, s.Done, s.Total, s.Failed, s.Running, s.Queued)
		}
		if st.Blocked > 0 {
			fmt.Fprintf(w, ", %d blocked", st.Blocked)
		}
		fmt.Fprintln(w)
	}
}

// graphFolder refuses a command that reads one job's database (report,
// export, logs) on the output folder of a job with stages, and says where
// its stages' databases are: nil for any other folder.
func graphFolder(cmd, out string) error {
	if _, err := os.Stat(filepath.Join(out, jobdb.FileName)); err == nil {
		return nil
	}
	if _, ok, _ := job.ReadGraphReport(out); !ok {
		return nil
	}
	return withCode(exitBadInput, fmt.Errorf("%s: %s holds a job with stages: its report.json is the graph's; each stage is a job of its own: p2pc %s %s", cmd, out, cmd, filepath.Join(out, "stages", "<stage>")))
}
