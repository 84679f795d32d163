package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// reserved names at the top of the output folder that artifacts may not take.
var reserved = map[string]bool{report.FileName: true, "tasks": true, ".p2pc": true,
	jobdb.FileName: true, jobdb.FileName + "-wal": true, jobdb.FileName + "-shm": true, jobdb.FileName + "-journal": true}

// reduce runs the plugin's reduce step over every task output and moves
// its files to the top of the output folder. A crashed or timed-out reduce
// is retried like a task.
func (r *runner) reduce(ctx context.Context, workRoot string) error {
	job := r.p.Spec
	params, err := json.Marshal(job.Params)
	if err != nil {
		return fmt.Errorf("encode job params: %w", err)
	}
	req := &sdk.ReduceRequest{JobID: r.p.ID.String(), Params: params}
	// Inline outputs live in the job database: the reduce step reads them
	// as files, written out for it below the work root.
	inline := filepath.Join(workRoot, "inline")
	if err := r.exportInline(ctx, inline); err != nil {
		return err
	}
	defer os.RemoveAll(inline)
	// The outputs were written by this process: open them to the task user.
	for _, dir := range []string{filepath.Join(r.p.OutDir, "tasks"), inline} {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // no output of that kind
		}
		if err := sandbox.GrantTree(dir, sandbox.Policy{User: r.opts.TaskUser}); err != nil {
			return fmt.Errorf("reduce: %w", err)
		}
	}
	ro, err := jobdb.OpenReadOnly(ctx, r.db.Path())
	if err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	r.mu.Lock()
	err = r.recs.each(ctx, ro, func(i int, t *report.Task) error {
		out := sdk.TaskOutput{TaskID: t.ID, Params: job.TaskParamsJSON(i)}
		root := r.p.OutDir
		if _, err := os.Lstat(filepath.Join(root, "tasks", t.ID)); err != nil {
			root = inline
		}
		for _, f := range t.Files {
			name := strings.TrimPrefix(f, "tasks/"+t.ID+"/")
			out.Files = append(out.Files, sdk.File{Name: name, Path: filepath.Join(root, filepath.FromSlash(f))})
		}
		req.Tasks = append(req.Tasks, out)
		return nil
	})
	r.mu.Unlock()
	ro.Close()
	if err != nil {
		return fmt.Errorf("reduce: read the tasks' outputs: %w", err)
	}
	for attempt := 0; attempt <= job.Retries; attempt++ {
		work := filepath.Join(workRoot, "reduce."+strconv.Itoa(attempt))
		if err = r.makeWork(work); err != nil {
			return err
		}
		req.WorkDir = work
		var res *sdk.Result
		res, err = r.pool.Reduce(ctx, req, &taskHost{id: "reduce", ev: r.opts.Events}, job.Timeout)
		if err == nil {
			err = r.placeArtifacts(work, res)
		}
		os.RemoveAll(work)
		os.RemoveAll(work + ".out")
		if err == nil || ctx.Err() != nil {
			return err
		}
		r.log.Warn("reduce attempt failed", "attempt", attempt, "outcome", pluginhost.Classify(ctx, err), "err", err)
	}
	return err
}

// exportInline writes every inline output to dir/tasks/<id>/<name>.
func (r *runner) exportInline(ctx context.Context, dir string) error {
	// The outputs are read with their tasks' rows: the records changed
	// since the journal's last write go to the database first.
	r.mu.Lock()
	err := r.journalLocked()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := r.db.Flush(ctx); err != nil {
		return err
	}
	err = r.db.Outputs(ctx, func(o jobdb.Output) error {
		return jobdb.WriteOutput(dir, o)
	})
	if err != nil {
		return fmt.Errorf("inline outputs for the reduce step: %w", err)
	}
	return nil
}

func (r *runner) placeArtifacts(work string, res *sdk.Result) error {
	out, err := taskrun.Collect(work, res, 0, nil)
	if err != nil {
		return err
	}
	stage, names := out.Stage, out.Files
	for _, n := range names {
		top := strings.SplitN(n, "/", 2)[0]
		if reserved[top] {
			return &sdk.TaskError{TaskID: "reduce", Msg: fmt.Sprintf("artifact %q would overwrite p2pc's %q", n, top)}
		}
	}
	for _, n := range names {
		dst := filepath.Join(r.p.OutDir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("place artifact %s: %w", n, err)
		}
		src := filepath.Join(stage, filepath.FromSlash(n))
		// The reduce step wrote it as the task user: the submitter's
		// output folder holds the submitter's files.
		if err := sandbox.Reclaim(src); err != nil {
			return fmt.Errorf("place artifact %s: %w", n, err)
		}
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("place artifact %s: %w", n, err)
		}
	}
	r.mu.Lock()
	r.rep.Outputs = names
	r.mu.Unlock()
	return nil
}
