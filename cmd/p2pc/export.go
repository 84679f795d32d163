package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// ExportCmd is `p2pc export OUT`: the inline outputs kept in the job
// database, as files or JSON lines.
type ExportCmd struct {
	Out    string `arg:"" help:"The job's output folder." type:"path"`
	Format string `help:"files: write TO/tasks/<id>/<name> per output; jsonl: one JSON object per output." default:"files" enum:"files,jsonl"`
	To     string `help:"Where to write: a folder for files (default OUT), a file for jsonl (default and '-': stdout)." type:"path" placeholder:"PATH"`
}

// exportLine is one output in --format jsonl.
type exportLine struct {
	ID     string          `json:"id"`
	Params json.RawMessage `json:"params"`
	Name   string          `json:"name"`
	// Text holds UTF-8 data; Base64 anything else.
	Text   *string `json:"text,omitempty"`
	Base64 []byte  `json:"base64,omitempty"`
}

// Run reads the job database (read-only: a run may be writing it). Every
// file it writes goes through a temporary file, synced, then renamed: a
// full disk leaves no file that looks whole but is not.
func (c *ExportCmd) Run(g *Globals) error {
	if err := graphFolder("export", c.Out); err != nil {
		return err
	}
	if c.To == "-" && c.Format == "files" {
		return withCode(exitBadInput, errors.New("export: --to -: --format files writes a folder of files (TO/tasks/<id>/<name>); --format jsonl prints the outputs on stdout"))
	}
	db, err := jobdb.OpenReadOnly(g.Ctx, filepath.Join(c.Out, jobdb.FileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitBadInput, fmt.Errorf("%s holds no job database: %w", c.Out, err))
	case errors.Is(err, jobdb.ErrCorrupt) || errors.Is(err, jobdb.ErrNewer):
		return withCode(exitBadInput, err)
	case err != nil:
		return withCode(exitInternal, err)
	}
	defer db.Close()
	n, where := 0, "stdout"
	// werr is the write that failed, told apart from the database's
	// errors (which wrap it as a failed read).
	var werr error
	count := func(write func(jobdb.Output) error) func(jobdb.Output) error {
		return func(o jobdb.Output) error {
			if werr = write(o); werr == nil {
				n++
			}
			return werr
		}
	}
	switch {
	case c.Format == "files":
		where = c.To
		if where == "" {
			where = c.Out
		}
		err = db.Outputs(g.Ctx, count(func(o jobdb.Output) error {
			path, err := jobdb.OutputPath(where, o)
			if err != nil {
				return err
			}
			return report.WriteFileAtomic(path, o.Data, 0o644)
		}))
	case c.To == "" || c.To == "-":
		bw := bufio.NewWriter(os.Stdout)
		err = db.Outputs(g.Ctx, count(jsonlEncoder(bw)))
		if err == nil {
			err = bw.Flush()
		}
	default:
		where = c.To
		err = report.WriteAtomic(c.To, 0o644, func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			err := db.Outputs(g.Ctx, count(jsonlEncoder(bw)))
			if werr != nil {
				err = werr
			}
			if err == nil {
				err = bw.Flush()
			}
			return err
		})
		werr = nil
	}
	if err != nil {
		if werr != nil {
			err = werr
		}
		return exportErr(g.Ctx, err)
	}
	fmt.Fprintf(os.Stderr, "exported %d inline outputs to %s\n", n, where)
	return nil
}

// jsonlEncoder writes each output to w as one line of --format jsonl.
func jsonlEncoder(w io.Writer) func(jobdb.Output) error {
	enc := json.NewEncoder(w)
	return func(o jobdb.Output) error {
		line := exportLine{ID: o.TaskID, Params: o.Params, Name: o.Name}
		if utf8.Valid(o.Data) {
			s := string(o.Data)
			line.Text = &s
		} else {
			line.Base64 = o.Data
		}
		return enc.Encode(line)
	}
}

// exportErr is the exit of an export that failed with err: 4 for a disk
// that refused the writes (full, read-only, ...), 2 for a --to whose
// folder does not exist.
func exportErr(ctx context.Context, err error) error {
	err = fmt.Errorf("export: %w", err)
	switch {
	case ctx.Err() != nil:
		return withCode(exitInterrupted, fmt.Errorf("interrupted: %w", err))
	case job.LocalDisk(err):
		return withCode(exitLocalDisk, fmt.Errorf("%w (nothing half-written is left: free space, then export again)", err))
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return withCode(exitBadInput, err)
	default:
		return withCode(exitInternal, err)
	}
}
