package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/p2pc/p2pc/internal/jobdb"
)

// ExportCmd is `p2pc export OUT`: the inline outputs kept in the job
// database, as files or JSON lines.
type ExportCmd struct {
	Out    string `arg:"" help:"The job's output folder." type:"path"`
	Format string `help:"files: write TO/tasks/<id>/<name> per output; jsonl: one JSON object per output." default:"files" enum:"files,jsonl"`
	To     string `help:"Where to write: a folder for files (default OUT), a file for jsonl (default stdout)." type:"path" placeholder:"PATH"`
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

// Run reads the job database (read-only: a run may be writing it).
func (c *ExportCmd) Run(g *Globals) error {
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
	n := 0
	if c.Format == "files" {
		to := c.To
		if to == "" {
			to = c.Out
		}
		err = db.Outputs(g.Ctx, func(o jobdb.Output) error {
			n++
			return jobdb.WriteOutput(to, o)
		})
	} else {
		var w io.Writer = os.Stdout
		var f *os.File
		if c.To != "" {
			if f, err = os.Create(c.To); err != nil {
				return withCode(exitBadInput, fmt.Errorf("export: %w", err))
			}
			defer f.Close()
			w = f
		}
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		err = db.Outputs(g.Ctx, func(o jobdb.Output) error {
			n++
			line := exportLine{ID: o.TaskID, Params: o.Params, Name: o.Name}
			if utf8.Valid(o.Data) {
				s := string(o.Data)
				line.Text = &s
			} else {
				line.Base64 = o.Data
			}
			return enc.Encode(line)
		})
		if err == nil {
			err = bw.Flush()
		}
		if err == nil && f != nil {
			err = f.Close()
		}
	}
	if err != nil {
		return withCode(exitInternal, fmt.Errorf("export: %w", err))
	}
	fmt.Fprintf(os.Stderr, "exported %d inline outputs\n", n)
	return nil
}
