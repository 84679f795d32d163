package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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
// writes its report.
func (c *ReportCmd) Run(g *Globals) error {
	rep, err := jobdb.ReadReport(g.Ctx, c.Out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitBadInput, fmt.Errorf("%s holds no p2pc job: %w", c.Out, err))
	case err != nil && errors.Is(err, jobdb.ErrCorrupt) && c.Salvage && rep != nil:
		rep.Warnings = append(rep.Warnings, "salvaged from a damaged job database: "+err.Error())
		fmt.Fprintf(os.Stderr, "p2pc: %v\np2pc: the report holds the %d tasks that were readable\n", err, len(rep.Tasks))
		c.Stdout = true
	case errors.Is(err, jobdb.ErrCorrupt):
		return withCode(exitBadInput, fmt.Errorf("%w (p2pc report --salvage %s prints what is readable)", err, c.Out))
	case errors.Is(err, jobdb.ErrNewer):
		return withCode(exitBadInput, err)
	case err != nil:
		return withCode(exitInternal, err)
	}
	if c.Stdout {
		if err := report.Encode(os.Stdout, rep); err != nil {
			return withCode(exitInternal, fmt.Errorf("print report: %w", err))
		}
		return nil
	}
	if err := report.Write(c.Out, rep); err != nil {
		return withCode(exitInternal, err)
	}
	return nil
}
