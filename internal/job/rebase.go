package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/jobdb"
)

// rebase makes the output folder, which holds an earlier version of this
// job (prev: the same name, another job ID, as after an edit of its
// spec), hold this one: of the earlier version's done tasks, those whose
// ID and key are unchanged are kept (renumbered to their place in this
// job; a run then reuses each whose output still matches its digest),
// and every other task's record and output folder go. A job database
// whose tasks shared state (package vc) keeps none: their outputs may
// depend on each other. A report.json without a database holds no keys:
// it keeps none either.
//
// The task folders that go are first moved, each by one rename, into
// OUT/.p2pc/trash (removed after, and by every run's end), then the job
// database is rebased in one transaction: a kill at any point leaves
// either the earlier version's database (whose tasks of moved folders
// then fail their check and are not reused) or this job's, and no
// half-removed folder in OUT/tasks.
func (p *Prepared) rebase(ctx context.Context, prev *previous, version string, log *slog.Logger) error {
	out := p.OutDir
	keep := map[int]int{}
	var done []DoneTask
	keptIDs := map[string]bool{}
	if prev.shared {
		log.Warn("the earlier version of the job in the output folder kept state its tasks share: none of its tasks is reused", "out", out)
	}
	if len(prev.rows) > 0 && !prev.shared {
		byID := make(map[string]jobdb.DoneRow, len(prev.rows))
		for _, row := range prev.rows {
			if row.Key != ([32]byte{}) {
				byID[row.ID] = row
			}
		}
		for i := range p.Spec.Tasks.Len() {
			if len(byID) == 0 {
				break
			}
			id := p.Spec.Tasks.ID(i)
			row, ok := byID[id]
			if !ok {
				continue
			}
			delete(byID, id)
			d, err := digest.Parse(row.Digest)
			// A streamed stage's keys are checked as its tasks are
			// released (stream.go): their own inputs are not known yet.
			if err != nil || p.stream == nil && row.Key != p.TaskKey(i) {
				continue
			}
			keep[row.Idx] = i
			keptIDs[id] = true
			done = append(done, DoneTask{Idx: i, Digest: d, Key: row.Key})
		}
	}
	trash := filepath.Join(out, ".p2pc", "trash")
	moved, err := trashFolders(filepath.Join(out, "tasks"), trash, keptIDs)
	if err != nil {
		return outDirErr(out, fmt.Errorf("let go of the earlier version's tasks: %w", err))
	}
	dbPath := filepath.Join(out, jobdb.FileName)
	if _, err := os.Stat(dbPath); err == nil {
		if err := jobdb.Rebase(ctx, dbPath, p.ID.String(), keep, jobdb.Options{Version: version, Logger: log}); err != nil {
			err = fmt.Errorf("output folder %s: %w", out, err)
			if errors.Is(err, jobdb.ErrFull) {
				return localDisk{err} // this machine's disk (exit 4)
			}
			return err
		}
	}
	if err := os.RemoveAll(trash); err != nil {
		log.Warn("remove the earlier version's task folders", "err", err)
	}
	prevTasks := prev.rep.Summary.Total
	if prev.rep.Tasks != nil {
		prevTasks = len(prev.rep.Tasks)
	}
	p.Rebased, p.Dropped = len(done), max(prevTasks-len(done), moved)
	log.Info("the output folder holds an earlier version of the job: tasks with unchanged keys are kept",
		"out", out, "earlier_job", prev.rep.JobID[:min(12, len(prev.rep.JobID))], "kept", p.Rebased, "let_go", p.Dropped)
	if prev.rep.Tasks != nil || len(keep) == 0 {
		// Nothing of it is reused (a report.json holds no keys).
		p.Previous, p.PreviousDone = nil, nil
		return nil
	}
	rep := *prev.rep
	rep.JobID, rep.Run = p.ID.String(), "" // a new run of this job
	p.Previous, p.PreviousDone = &rep, done
	return nil
}

// trashFolders moves every entry of tasks whose name is not in keep into
// trash (emptied first: a killed rebase's), one rename each, and says how
// many it moved.
func trashFolders(tasks, trash string, keep map[string]bool) (int, error) {
	if err := os.RemoveAll(trash); err != nil {
		return 0, err
	}
	f, err := os.Open(tasks)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Every name first: a folder read while entries leave it may skip some.
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, n := range names {
		if keep[n] {
			continue
		}
		if moved == 0 {
			if err := os.MkdirAll(trash, 0o755); err != nil {
				return moved, err
			}
		}
		if err := os.Rename(filepath.Join(tasks, n), filepath.Join(trash, n)); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}
