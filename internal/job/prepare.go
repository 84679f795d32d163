package job

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// Input is a job input file with its content digest.
type Input struct {
	Name   string
	Path   string
	Digest digest.ID
}

// Prepared is a job ready to run.
type Prepared struct {
	Spec   *spec.Job
	Plugin *pluginbuild.Plugin
	// Builds are the executables of a per-platform plugin map, by
	// GOOS/GOARCH (nil for a single plugin; Plugin is this machine's).
	Builds map[string]*pluginbuild.Plugin
	Inputs []Input
	// ID is the job ID: SHA-256 of the canonical spec, the plugin's ID
	// (pluginID: its source key, or its digests) and the input digests.
	ID digest.ID
	// OutDir is the absolute output folder.
	OutDir string
	// Previous is the report of an earlier, unfinished run of the same job
	// in OutDir (nil if none), its job's fields only (Tasks is nil), but
	// for a report.json of a p2pc that kept no job database.
	Previous *report.Report
	// PreviousDone are the tasks Previous holds as done, by index, with
	// their output's digest: they are reused if their output still
	// matches (a few dozen bytes each, not their records). When OutDir
	// held an earlier version of the job (another job ID, the same name),
	// Prepare kept of it only the tasks whose key is unchanged (rebase).
	PreviousDone []DoneTask
	// Rebased counts the tasks of an earlier version of the job that
	// Prepare kept (their keys unchanged); Dropped those it let go (their
	// records and their folders).
	Rebased, Dropped int

	// keyBase is what every task's key shares (TaskKey).
	keyBase KeyBase
	// taskInputs, if set, are the inputs of task i of its own, besides
	// Inputs (PrepareOptions.TaskInputs, or stream's).
	taskInputs func(i int) []Input
	// stream, for a streamed stage, holds each task's own inputs, set as
	// the task is released (stream.go).
	stream *streamInputs

	// lock holds OutDir for this run (OUT/.p2pc-lock) until Release.
	lock *dirlock.Lock
	// cacheDir is PrepareOptions.CacheDir: the plugin's Describe answer
	// is remembered there (describeInfo).
	cacheDir string
}

// Release lets the output folder go: another run may use it. The caller
// of Prepare calls it once the job has ended (it is idempotent).
func (p *Prepared) Release() error {
	if p.lock == nil {
		return nil
	}
	err := p.lock.Release()
	p.lock = nil
	return err
}

// outDirErr is the error of an output folder that cannot be made, locked
// or written: a fault of this machine's disk (ErrLocalDisk: full,
// read-only, not writable) or else bad input.
func outDirErr(out string, err error) error {
	if errno, ok := localDiskErrno(err); ok {
		return &diskFault{where: "output folder " + out, errno: errno, err: err}
	}
	return bad(fmt.Errorf("output folder %s: %w", out, err))
}

// lockOutDir makes out if it is missing (made says so) and locks it for
// this run. When another run holds it, the error (ErrBadInput) names that
// run and nothing is changed.
func lockOutDir(out string) (lock *dirlock.Lock, made bool, err error) {
	if _, err := os.Stat(out); errors.Is(err, fs.ErrNotExist) {
		made = true
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, false, outDirErr(out, err)
	}
	lock, err = dirlock.Acquire(filepath.Join(out, dirlock.FileName))
	var held *dirlock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, false, bad(fmt.Errorf("output folder %s is in use by another p2pc run (%s): wait for it to end, or choose another --out", out, held.Owner))
	case err != nil:
		if made {
			os.Remove(out)
		}
		return nil, false, outDirErr(out, err)
	}
	return lock, made, nil
}

// PrepareOptions tune Prepare.
type PrepareOptions struct {
	// OutDir overrides the spec's output folder.
	OutDir string
	// CacheDir holds built plugins.
	CacheDir string
	// Force lets a job write into a folder holding the results of a job
	// of another name, or other files. A job of the same name (an edited
	// spec) needs no force: its tasks whose keys are unchanged are kept,
	// the others let go.
	Force bool
	// Version names this p2pc in a job database it migrates.
	Version string
	Logger  *slog.Logger
	// Inputs are inputs every task sees besides the spec's, already
	// digested, and TaskInputs those of task i alone (nil: none): a stage's
	// upstream outputs (graph.go). Both are part of the job ID and of the
	// keys of the tasks that see them.
	Inputs     []Input
	TaskInputs func(i int) []Input
	// PluginKey, if set, is the source key (pluginbuild.Plugin.SourceKey)
	// of the plugin executable given, built from a Go package elsewhere:
	// a job taken over from a `p2pc run` that built its plugin keeps that
	// run's job ID and task keys.
	PluginKey string
	// streamed, for a stage with `each` or `group` needs (graph.go),
	// names them: the tasks' own inputs are set as each is released.
	streamed []string
}

// Prepare resolves the plugin (building it if it is a Go package), hashes
// the inputs, computes the job ID and checks the output folder. Every
// error it returns satisfies errors.Is(err, ErrBadInput) unless it is an
// internal failure.
func Prepare(ctx context.Context, job *spec.Job, opts PrepareOptions) (_ *Prepared, retErr error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Prepared{Spec: job, cacheDir: opts.CacheDir}
	out := job.Output
	if opts.OutDir != "" {
		var err error
		if out, err = filepath.Abs(opts.OutDir); err != nil {
			return nil, bad(fmt.Errorf("output folder: %w", err))
		}
	}
	p.OutDir = out
	// The output folder is this run's until Release: take it first, so a
	// second run on it stops at once and changes nothing.
	lock, made, err := lockOutDir(out)
	if err != nil {
		return nil, err
	}
	p.lock = lock
	defer func() {
		if retErr != nil {
			p.Release()
			if made {
				os.Remove(out) // only if still empty
			}
		}
	}()
	if p.Builds, err = resolveBuilds(ctx, job, opts.CacheDir, log); err != nil {
		return nil, err
	}
	plug, err := pluginbuild.Resolve(ctx, job.PluginPath, opts.CacheDir, log)
	if err != nil {
		return nil, pluginErr(ctx, job, err)
	}
	if opts.PluginKey != "" && plug.SourceKey == "" {
		plug.SourceKey = opts.PluginKey
	}
	p.Plugin = plug
	for _, in := range job.Inputs {
		fi, err := os.Stat(in.Path)
		if err != nil {
			return nil, bad(fmt.Errorf("%s:%d:%d: input %q: %w", job.File, in.Pos.Line, in.Pos.Col, in.Name, err))
		}
		if !fi.Mode().IsRegular() {
			return nil, bad(fmt.Errorf("%s:%d:%d: input %q: %s is not a regular file", job.File, in.Pos.Line, in.Pos.Col, in.Name, in.Path))
		}
		d, err := digest.File(in.Path)
		if err != nil {
			return nil, bad(fmt.Errorf("%s:%d:%d: input %q: %w", job.File, in.Pos.Line, in.Pos.Col, in.Name, err))
		}
		p.Inputs = append(p.Inputs, Input{Name: in.Name, Path: in.Path, Digest: d})
	}
	p.Inputs = append(p.Inputs, opts.Inputs...)
	p.ID = JobID(job, pluginID(plug, p.Builds), p.Inputs)
	p.keyBase = NewKeyBase(pluginID(plug, p.Builds), p.Inputs, job.Sandbox)
	switch {
	case opts.streamed != nil:
		p.stream = &streamInputs{ins: map[int][]Input{}}
		p.taskInputs = p.stream.get
		p.ID = streamedID(p.ID, opts.streamed)
	case opts.TaskInputs != nil:
		p.taskInputs = opts.TaskInputs
		p.ID = p.withTaskInputs(p.ID)
	}

	if err := p.checkOutDir(ctx, opts, log); err != nil {
		return nil, err
	}
	return p, nil
}

// JobID is the SHA-256 of the canonical job: the spec's canonical form,
// the plugin's ID (pluginID) and every input's name and digest, in spec
// order.
func JobID(job *spec.Job, plugin digest.ID, inputs []Input) digest.ID {
	h := sha256.New()
	h.Write([]byte("p2pc-job-v1\n"))
	job.WriteCanonical(h)
	fmt.Fprintf(h, "\nplugin %s\n", plugin)
	for _, in := range inputs {
		fmt.Fprintf(h, "input %q %s\n", in.Name, in.Digest)
	}
	var id digest.ID
	h.Sum(id[:0])
	return id
}

// checkOutDir makes sure the output folder can take this job's results:
// it must be writable, and must not hold the results of a job of another
// name (unless opts.Force) or unrelated files. It sets Previous and
// PreviousDone from an earlier run of the same job, if any (its job
// database, or the report.json of a p2pc that kept no database); an
// earlier version of the job (the same name, another job ID: an edited
// spec) is rebased first: its tasks whose keys are unchanged are kept.
func (p *Prepared) checkOutDir(ctx context.Context, opts PrepareOptions, log *slog.Logger) error {
	out, jobID, force := p.OutDir, p.ID.String(), opts.Force
	probe, err := os.CreateTemp(out, ".p2pc-probe-*")
	if err != nil {
		return outDirErr(out, err)
	}
	probe.Close()
	os.Remove(probe.Name())

	prev, err := readPrevious(ctx, out, jobID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		entries, err := os.ReadDir(out)
		if err != nil {
			return bad(fmt.Errorf("output folder %s: %w", out, err))
		}
		for _, e := range entries {
			if !ours[e.Name()] && !force {
				return bad(fmt.Errorf("output folder %s is not empty and holds no p2pc report (found %q): choose another --out, or --force to write there anyway", out, e.Name()))
			}
		}
		return nil
	case errors.Is(err, jobdb.ErrCorrupt) || errors.Is(err, jobdb.ErrNewer):
		if !force {
			return damaged(out, err)
		}
		return setAside(out)
	case err != nil:
		if force {
			return removeDB(out)
		}
		return bad(fmt.Errorf("output folder %s: %w (use --force to replace it)", out, err))
	case prev.rep.JobID == jobID:
		p.Previous, p.PreviousDone = prev.rep, prev.done
		return nil
	case prev.rep.Name != p.Spec.Name && !force:
		return bad(fmt.Errorf("output folder %s holds the results of another job (%s, job %.12s; this is job %s, %.12s): choose another --out, or --force to replace them (tasks whose plugin, params and inputs are unchanged are kept)", out, prev.rep.Name, prev.rep.JobID, p.Spec.Name, jobID))
	}
	return p.rebase(ctx, prev, opts.Version, log)
}

// damaged is the error of an output folder whose job database is
// damaged (or of a newer p2pc), with what the user can do.
func damaged(out string, err error) error {
	return bad(fmt.Errorf("output folder %s: %w: `p2pc report %s` writes what is readable; move the database away, or use --force to set it aside and start afresh", out, err, out))
}

// ours are the names p2pc keeps at the top of an output folder.
var ours = map[string]bool{
	".p2pc": true, "tasks": true, dirlock.FileName: true, report.FileName: true,
	jobdb.FileName: true, jobdb.FileName + "-wal": true, jobdb.FileName + "-shm": true, jobdb.FileName + "-journal": true,
}

// DoneTask is a task an earlier run finished: its index and its
// output's digest.
type DoneTask struct {
	Idx    int
	Digest digest.ID
	// NoKey: its row holds no key (a p2pc that kept none wrote it): the
	// run that reuses it writes it.
	NoKey bool
	// Key is its row's key, checked when the task is released (a
	// streamed stage's: stream.go).
	Key [32]byte
}

// previous is what an earlier run left in the output folder.
type previous struct {
	// rep is its job's fields (Tasks nil), but for a report.json of a
	// p2pc that kept no job database (Tasks kept: no database holds them).
	rep *report.Report
	// done are its tasks done (same job); for another job, rows are.
	done []DoneTask
	rows []jobdb.DoneRow
	// shared: its tasks kept state they share (package vc).
	shared bool
}

// readPrevious reads the state of an earlier run in out: its job
// database, or, without one, its report.json: the job's fields and the
// tasks done, as DoneTasks for the job jobID, as rows (with their IDs
// and keys) for another. Neither gives an error wrapping fs.ErrNotExist.
func readPrevious(ctx context.Context, out, jobID string) (*previous, error) {
	path := filepath.Join(out, jobdb.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		rep, err := report.Read(out)
		if err != nil {
			return nil, err
		}
		prev := &previous{rep: rep}
		for i, t := range rep.Tasks {
			if d, err := digest.Parse(t.Digest); err == nil && t.State == report.TaskDone {
				prev.done = append(prev.done, DoneTask{Idx: i, Digest: d})
			}
		}
		return prev, nil // no keys: another job keeps none of them
	}
	// A run killed as it made the database may have left a hot journal,
	// which only a writer rolls back: then it is opened for writing (the
	// folder is this run's already: its lock is held).
	open := func() (*jobdb.DB, error) { return jobdb.OpenReadOnly(ctx, path) }
	if _, err := os.Stat(path + "-journal"); err == nil {
		open = func() (*jobdb.DB, error) { return jobdb.Open(ctx, path, jobdb.Options{}) }
	}
	db, err := open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rep, err := db.LoadJob(ctx)
	if err != nil {
		return nil, err
	}
	if rep.JobID == "" { // made, but killed before it held the job
		return nil, fmt.Errorf("job database %s holds no job: %w", path, fs.ErrNotExist)
	}
	rep.Tasks = nil
	prev := &previous{rep: rep}
	same := rep.JobID == jobID
	if !same {
		if prev.shared, err = db.SharedState(ctx); err != nil {
			return nil, err
		}
	}
	if err := db.Done(ctx, func(row jobdb.DoneRow) error {
		if !same {
			prev.rows = append(prev.rows, row)
			return nil
		}
		if d, err := digest.Parse(row.Digest); err == nil {
			prev.done = append(prev.done, DoneTask{Idx: row.Idx, Digest: d, NoKey: row.Key == [32]byte{}, Key: row.Key})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return prev, nil
}

// removeDB deletes the job database of another job (--force).
func removeDB(out string) error {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(filepath.Join(out, jobdb.FileName+suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace job database: %w", err)
		}
	}
	return nil
}

// setAside renames an unusable job database out of the way (--force),
// saying where it went: it is never overwritten.
func setAside(out string) error {
	stamp := time.Now().UTC().Format("20060102T150405")
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		from := filepath.Join(out, jobdb.FileName+suffix)
		to := filepath.Join(out, jobdb.FileName+".broken-"+stamp+suffix)
		if err := os.Rename(from, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("set the job database aside: %w", err)
		}
	}
	slog.Warn("the job database was unusable and is set aside; the job starts afresh", "kept", filepath.Join(out, jobdb.FileName+".broken-"+stamp))
	return nil
}
