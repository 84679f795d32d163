package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// ReportCmd is `p2pc report OUT`: report.json from the job database.
type ReportCmd struct {
	Out     string `arg:"" help:"The job's output folder." type:"path"`
	Stdout  bool   `help:"Print the report on stdout instead of writing OUT/report.json."`
	Salvage bool   `help:"The job database is damaged: report what is readable of it (on stdout)."`
}

// Run reads the job database (read-only: a run may be writing it) and
// writes its report, a task at a time (a job of a million tasks is
// reported in bounded memory). A damaged database leaves report.json as
// it was (with --stdout, the report printed may stop short of the
// damage; the exit code says so). --salvage reads the job whole, as far
// as it is readable.
func (c *ReportCmd) Run(g *Globals) error {
	if err := graphFolder("report", c.Out); err != nil {
		return err
	}
	if c.Salvage {
		return c.salvage(g)
	}
	var job *report.Report
	err := jobdb.StreamReport(g.Ctx, c.Out, func(head *report.Report, each func(yield func(*report.Task) error) error) error {
		job = head
		if c.Stdout {
			return report.EncodeEach(os.Stdout, head, each)
		}
		return report.WriteEach(c.Out, head, each)
	})
	if err != nil {
		return reportErr(c.Out, err)
	}
	c.said(job)
	return nil
}

// said tells on stderr what the command did: where the report went, and
// the job's state and counts in one line.
func (c *ReportCmd) said(rep *report.Report) {
	where := "printed the report on stdout"
	if !c.Stdout {
		where = "wrote " + filepath.Join(c.Out, report.FileName)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", where, jobLine(rep))
}

// jobLine is a job's state and counts in one line, as the run's summary
// begins: "job NAME (ID) STATE: D of T tasks done (R reused from an
// earlier run), F failed".
func jobLine(rep *report.Report) string {
	line := fmt.Sprintf("job %s (%.12s) %s: %d of %d tasks done", rep.Name, rep.JobID, rep.State, rep.Summary.Done, rep.Summary.Total)
	if rep.Summary.Reused > 0 {
		line += fmt.Sprintf(" (%d reused from an earlier run)", rep.Summary.Reused)
	}
	if rep.Summary.Failed > 0 {
		line += fmt.Sprintf(", %d failed", rep.Summary.Failed)
	}
	return line
}

// reportErr is the exit of `p2pc report out` whose reading failed with err.
func reportErr(out string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitBadInput, fmt.Errorf("%s holds no p2pc job: %w", out, err))
	case errors.Is(err, jobdb.ErrCorrupt):
		return withCode(exitBadInput, fmt.Errorf("%w (p2pc report --salvage %s prints what is readable)", err, out))
	case errors.Is(err, jobdb.ErrNewer):
		return withCode(exitBadInput, err)
	default:
		return withCode(exitInternal, err)
	}
}

// salvage is `p2pc report --salvage`: it reads the job whole, into
// memory. Of a damaged database it prints what is readable on stdout,
// with a warning that says what could not be read; of a sound one it
// writes the report as Run does.
func (c *ReportCmd) salvage(g *Globals) error {
	rep, err := jobdb.ReadReport(g.Ctx, c.Out)
	if err != nil && errors.Is(err, jobdb.ErrCorrupt) && rep != nil {
		rep.Warnings = append(rep.Warnings, "salvaged from a damaged job database: "+err.Error())
		fmt.Fprintf(os.Stderr, "p2pc: %v\np2pc: the report holds the %d tasks that were readable\n", err, len(rep.Tasks))
		c.Stdout = true
	} else if err != nil {
		return reportErr(c.Out, err)
	}
	if c.Stdout {
		if err := report.Encode(os.Stdout, rep); err != nil {
			return withCode(exitInternal, fmt.Errorf("print report: %w", err))
		}
	} else if err := report.Write(c.Out, rep); err != nil {
		return withCode(exitInternal, err)
	}
	c.said(rep)
	return nil
}
