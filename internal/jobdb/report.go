package jobdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/report"
)

// ReadReport reads the job in the output folder dir as a report: from its
// job database (read-only: safe while a run writes it), or from
// report.json when there is no database (an output folder of a p2pc
// without one). Neither gives an error wrapping fs.ErrNotExist.
func ReadReport(ctx context.Context, dir string) (*report.Report, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return report.Read(dir)
	}
	db, err := OpenReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rep, err := db.Load(ctx)
	if err != nil {
		return rep, err
	}
	if rep.JobID == "" {
		return nil, fmt.Errorf("job database %s holds no job yet: %w", path, fs.ErrNotExist)
	}
	rep.SplitPeerIDs() // as report.json names peers
	return rep, nil
}

// StreamReport reads the job in the output folder dir as ReadReport
// does, but a task at a time: it calls encode with the report's head (its
// job-level fields and summary; Tasks empty) and each, which yields its
// tasks in order, one in memory at a time (report.EncodeEach and
// report.WriteEach take them). A job of a million tasks is so reported
// in bounded memory. An error of the database comes from StreamReport,
// through encode when each meets it; a damaged database may thus be found
// after encode has begun to write (WriteEach then leaves no file).
func StreamReport(ctx context.Context, dir string, encode func(head *report.Report, each func(yield func(*report.Task) error) error) error) error {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		rep, err := report.Read(dir)
		if err != nil {
			return err
		}
		return encode(rep, func(yield func(*report.Task) error) error {
			for i := range rep.Tasks {
				if err := yield(&rep.Tasks[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	db, err := OpenReadOnly(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	head, err := db.Head(ctx)
	if err != nil {
		return err
	}
	if head.JobID == "" {
		return fmt.Errorf("job database %s holds no job yet: %w", path, fs.ErrNotExist)
	}
	return encode(head, func(yield func(*report.Task) error) error {
		return db.EachTask(ctx, func(_ int, t *report.Task) error { return yield(t) })
	})
}

// WriteOutput writes an inline output where its task's folder would be:
// dir/tasks/<id>/<name>.
func WriteOutput(dir string, o Output) error {
	path, err := OutputPath(dir, o)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, o.Data, 0o644); err != nil {
		return fmt.Errorf("write output of task %s: %w", o.TaskID, err)
	}
	return nil
}

// OutputPath is where WriteOutput writes o in dir (tasks/<id>/<name>),
// its folder made.
func OutputPath(dir string, o Output) (string, error) {
	name := filepath.FromSlash(o.Name)
	if !filepath.IsLocal(o.TaskID) || !filepath.IsLocal(name) {
		return "", fmt.Errorf("write output of task %q: %q is not a local name", o.TaskID, o.Name)
	}
	path := filepath.Join(dir, "tasks", o.TaskID, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("write output of task %s: %w", o.TaskID, err)
	}
	return path, nil
}
