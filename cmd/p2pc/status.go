package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// StatusCmd is `p2pc status OUT`: a job's state from its database, from
// another terminal while it runs or after it ended or crashed.
type StatusCmd struct {
	Out      string        `arg:"" help:"The job's output folder." type:"path"`
	JSON     bool          `help:"Print the status as JSON."`
	Watch    bool          `help:"Print the status again every --every until the job is no longer running."`
	Every    time.Duration `help:"How often --watch prints." default:"2s"`
	Window   time.Duration `help:"The rate is tasks done per second over this last stretch." default:"1m"`
	Failures int           `help:"How many of the last failed attempts to show." default:"5"`
}

// Run opens the database read-only (safe while the run writes it). It
// exits 0 for a complete job, 3 for a failed one and 5 for one that is
// running or was interrupted (with --watch: as the job ends).
func (c *StatusCmd) Run(g *Globals) error {
	ctx := g.Ctx
	if ok, err := c.statusGraph(g); ok {
		return err
	}
	if ok, err := c.statusFork(g); ok {
		return err
	}
	db, err := jobdb.OpenReadOnly(ctx, filepath.Join(c.Out, jobdb.FileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitBadInput, fmt.Errorf("%s holds no job database: %w", c.Out, err))
	case errors.Is(err, jobdb.ErrCorrupt) || errors.Is(err, jobdb.ErrNewer):
		return withCode(exitBadInput, err)
	case err != nil:
		return withCode(exitInternal, err)
	}
	defer db.Close()
	for {
		s, err := db.Status(ctx, time.Now(), c.Window, c.Failures)
		if err != nil {
			return withCode(exitInternal, err)
		}
		if s.State == report.StateRunning {
			if held, known := folderHeld(c.Out); known && !held {
				// The journal says running, but no run holds the folder:
				// it died (SIGKILL, a crash, a power cut).
				s.State = report.StateInterrupted
				s.Error = "no p2pc run holds the folder: the run died; run the same command again to resume"
				s.ETA = 0
			}
		}
		if c.JSON {
			if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
				return withCode(exitInternal, err)
			}
		} else {
			printStatus(os.Stdout, s)
		}
		if !c.Watch || s.State != report.StateRunning {
			return stateExit(s.State)
		}
		select {
		case <-ctx.Done():
			return withCode(exitInterrupted, nil)
		case <-time.After(c.Every):
		}
		if !c.JSON {
			fmt.Println()
		}
	}
}

// stateExit is the exit of p2pc status for a job in state: 0 only for a
// complete job, so that a script can tell (README's exit codes).
func stateExit(state string) error {
	switch state {
	case report.StateComplete:
		return nil
	case report.StateFailed:
		return withCode(exitTaskFailed, nil)
	default: // running, interrupted, or a run killed before its first commit
		return withCode(exitIncomplete, nil)
	}
}

func printStatus(w io.Writer, s *jobdb.Status) {
	id := s.JobID
	if len(id) > 12 {
		id = id[:12]
	}
	fmt.Fprintf(w, "job %s (%s) %s", s.Name, id, s.State)
	if s.Error != "" {
		fmt.Fprintf(w, ": %s", s.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  tasks: %d/%d done, %d failed, %d running, %d queued\n", s.Done, s.Total, s.Failed, s.Running, s.Queued)
	end := time.Now()
	if !s.Finished.IsZero() {
		end = s.Finished
	}
	if !s.Started.IsZero() {
		fmt.Fprintf(w, "  started: %s (%s ago)\n", s.Started.Local().Format(time.DateTime), time.Since(s.Started).Round(time.Second))
	}
	fmt.Fprintf(w, "  rate: %.1f tasks/s (over the last %s of the run)", s.Rate, min(s.Window, end.Sub(s.Started)).Round(time.Second))
	if s.ETA > 0 {
		fmt.Fprintf(w, ", ETA %s", s.ETA.Round(time.Second))
	}
	fmt.Fprintln(w)
	if len(s.Failures) > 0 {
		fmt.Fprintln(w, "  last failures:")
		for _, f := range s.Failures {
			peer, _ := report.SplitPeer(f.Peer)
			fmt.Fprintf(w, "    %s task %s on %s: %s", f.End.Local().Format(time.TimeOnly), f.Task, peer, f.Outcome)
			if f.Error != "" {
				fmt.Fprintf(w, ": %s", firstLine(f.Error))
			}
			fmt.Fprintln(w)
		}
	}
}
