package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// Scenario is one fault, injected into a real job.
type Scenario struct {
	// Name selects it (test name, bench row).
	Name string
	// Doc says what the scenario does and what it asserts.
	Doc string
	// Short: it also runs under `go test -short`.
	Short bool
	run   func(ctx context.Context, e *Env) (*Outcome, error)
}

// Outcome is what one run of a scenario measured. A run survived when
// Run returned no error: every assertion held.
type Outcome struct {
	// Exit is the exit code of the (last) `p2pc run`.
	Exit int
	// Wall is how long the scenario's job ran, from the submission to its
	// end (the last run's, for scenarios that run a job twice: both).
	Wall time.Duration
	// Recover is the time from the fault (or its end) to the sign of
	// recovery the scenario watches: the first task accepted after it, the
	// job's clean failure, a healed member's first lease. 0: not measured.
	Recover time.Duration
	// Lost is the work the fault cost: attempts that did not produce the
	// accepted answer (lost, refused, rejected, crashed, timed out).
	Lost int
	// Notes are what the scenario observed, for logs and the bench's
	// summary.
	Notes []string
}

func (o *Outcome) note(format string, args ...any) {
	o.Notes = append(o.Notes, fmt.Sprintf(format, args...))
}

// Env is what scenarios share: the binary, the repository (plugins), a
// scratch folder and the expected answers of clean runs.
type Env struct {
	// Bin is the p2pc binary (harness.Build).
	Bin string
	// Root is the repository (its plugins/ are the jobs' plugins).
	Root string
	// Dir is a scratch folder; each scenario run takes a folder in it.
	Dir string
	// Data is the submitters' --data folder shared by the scenario runs,
	// so that a plugin is built once (default: Dir/submit).
	Data string
	// Logger receives the labs' lines (nil: discarded).
	Logger *slog.Logger
	// Logf, if set, receives one line per step of a scenario.
	Logf func(format string, args ...any)

	mu    sync.Mutex
	clean map[string]map[string]string // spec body -> task ID -> digest
	seq   int
}

func (e *Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// Run runs one scenario once, bounded by ctx. The error says which
// assertion failed; the Outcome is returned also then, as far as known.
func (e *Env) Run(ctx context.Context, s Scenario) (*Outcome, error) {
	if err := harness.LabAvailable(); err != nil {
		return nil, fmt.Errorf("chaos %s: %w", s.Name, err)
	}
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.Data == "" {
		e.Data = filepath.Join(e.Dir, "submit")
	}
	out, err := s.run(ctx, e)
	if err != nil {
		return out, fmt.Errorf("chaos %s: %w", s.Name, err)
	}
	return out, nil
}

// scratch makes a fresh folder for one scenario run.
func (e *Env) scratch(name string) (string, error) {
	e.mu.Lock()
	e.seq++
	n := e.seq
	e.mu.Unlock()
	dir := filepath.Join(e.Dir, fmt.Sprintf("%s-%d", name, n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("scratch folder: %w", err)
	}
	return dir, nil
}

// labRun is one scenario's lab and job.
type labRun struct {
	e   *Env
	dir string
	lab *harness.Lab
	// spec is the job written by start (setup.job), want the task digests
	// of a clean run of setup.clean.
	spec string
	want map[string]string
}

// setup is how a scenario starts (Env.start).
type setup struct {
	name  string // the scratch folder's name
	mdns  bool   // the peers find each other by mDNS
	job   string // the job's spec, written as job.yaml ("": none)
	clean string // the spec whose clean run gives the outputs wanted (default: job)
	peers []harness.PeerSpec
	// joinFirst: the peers join the first one (harness.LabConfig.JoinFirst).
	joinFirst bool
}

// start computes the outputs wanted, builds the lab and writes the job of
// s. The caller defers r.finish.
func (e *Env) start(ctx context.Context, s setup) (r *labRun, err error) {
	var want map[string]string
	if clean := cmp.Or(s.clean, s.job); clean != "" {
		if want, err = e.expect(ctx, clean); err != nil {
			return nil, err
		}
	}
	if r, err = e.newLab(ctx, s); err != nil {
		return nil, err
	}
	r.want = want
	if s.job != "" {
		if r.spec, err = writeSpec(r.dir, "job", s.job); err != nil {
			return nil, errors.Join(err, r.close())
		}
	}
	return r, nil
}

// newLab builds a Bridge lab (a namespace per peer on one bridge) with
// loopback-tuned failure detection off: the peers keep p2pc's LAN
// defaults, as users run them.
func (e *Env) newLab(ctx context.Context, s setup) (*labRun, error) {
	dir, err := e.scratch(s.name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "lab"), 0o755); err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	lab, err := harness.NewLab(ctx, harness.LabConfig{
		Bin: e.Bin, Peers: s.peers, Mode: harness.Bridge, MDNS: s.mdns, JoinFirst: s.joinFirst, Dir: filepath.Join(dir, "lab"),
		StopGrace: 2 * time.Second, Logger: e.Logger, StartTimeout: 20 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &labRun{e: e, dir: dir, lab: lab}, nil
}

// close closes the lab and checks that nothing it started still runs.
func (r *labRun) close() error {
	var errs []error
	if err := r.lab.Close(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range r.lab.Procs() {
		select {
		case <-p.Done():
		default:
			errs = append(errs, fmt.Errorf("%s (pid %d) still runs after the lab closed", p.Name, p.Pid()))
		}
	}
	if left := r.lab.Leftovers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left running in the lab's namespaces after every process it started was stopped: %s", strings.Join(left, "; ")))
	}
	if err := r.lab.CheckLogs(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// finish closes the lab and joins its error to err.
func (r *labRun) finish(err *error) {
	if cerr := r.close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("after the run: %w", cerr))
	}
}

// submit starts a job, into out (a fresh name under the run's folder).
func (r *labRun) submit(spec, out string, o harness.SubmitOptions) (*harness.Running, error) {
	o.Spec, o.Out = spec, filepath.Join(r.dir, out)
	if o.Data == "" {
		o.Data = r.e.Data
	}
	if o.Timeout == 0 {
		o.Timeout = 90 * time.Second
	}
	return r.lab.StartSubmit(o)
}

// complete submits spec into out (see submit) and waits for the job to
// complete with the outputs want (see completes).
func (r *labRun) complete(ctx context.Context, spec, out string, o harness.SubmitOptions, want map[string]string, single bool, res *Outcome) (*report.Report, error) {
	run, err := r.submit(spec, out, o)
	if err != nil {
		return nil, err
	}
	return completes(ctx, run, filepath.Join(r.dir, out), want, single, res)
}

// peer returns the lab's peer by name.
func (r *labRun) peer(name string) *harness.LabPeer {
	for _, p := range r.lab.Peers() {
		if p.Name == name {
			return p
		}
	}
	panic("chaos: no peer " + name)
}

// progress reads the report of a job still running (nil if none yet).
func progress(out string) *report.Report {
	rep, err := harness.ReadReport(out)
	if err != nil {
		return nil
	}
	return rep
}

// okOn counts the tasks accepted from peer.
func okOn(rep *report.Report, peer string) int {
	n := 0
	if rep == nil {
		return 0
	}
	for _, t := range rep.Tasks {
		if t.State == report.TaskDone && t.Peer == peer {
			n++
		}
	}
	return n
}

// lost counts the attempts that did not give the accepted answer.
func lost(rep *report.Report) int {
	n := 0
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if a.Outcome != report.OutcomeOK {
				n++
			}
		}
	}
	return n
}

// firstOKAfter is the start of the first accepted attempt that started
// at or after t (zero if none).
func firstOKAfter(rep *report.Report, t time.Time, peer string) time.Time {
	var first time.Time
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK && !a.Start.Before(t) && (peer == "" || a.Peer == peer) &&
				(first.IsZero() || a.Start.Before(first)) {
				first = a.Start
			}
		}
	}
	return first
}

// inlineOutputs names the outputs job.db keeps (tasks/<id>/<name>, as
// the report lists them): they have no file until p2pc export.
func inlineOutputs(outDir string) (map[string]bool, error) {
	dir, done, err := harness.JobDBDir(outDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // an older run's folder: every output is a file
	}
	if err != nil {
		return nil, err
	}
	defer done()
	ctx := context.Background()
	db, err := jobdb.OpenReadOnly(ctx, filepath.Join(dir, jobdb.FileName))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	names := map[string]bool{}
	err = db.Outputs(ctx, func(o jobdb.Output) error {
		names["tasks/"+o.TaskID+"/"+o.Name] = true
		return nil
	})
	return names, err
}

// checkReport checks a report's consistency: the summary counts what the
// tasks say; a done task has one accepted attempt (single runs: exactly
// one ok attempt), a digest and its files; a complete job has every task
// done; outputs equal the clean run's (want: task ID -> digest).
func checkReport(rep *report.Report, outDir string, want map[string]string, single bool) error {
	if rep == nil {
		return errors.New("no report")
	}
	var errs []error
	inline, err := inlineOutputs(outDir)
	if err != nil {
		errs = append(errs, err)
	}
	done, failed := 0, 0
	for _, t := range rep.Tasks {
		ok := 0
		for _, a := range t.Attempts {
			if a.Outcome == report.OutcomeOK {
				ok++
			}
		}
		switch t.State {
		case report.TaskDone:
			done++
			if ok == 0 || (single && ok != 1) {
				errs = append(errs, fmt.Errorf("task %s done with %d ok attempts (accepted twice?)", t.ID, ok))
			}
			if t.Digest == "" {
				errs = append(errs, fmt.Errorf("task %s done without a digest", t.ID))
			}
			if d, known := want[t.ID]; known && d != t.Digest {
				errs = append(errs, fmt.Errorf("task %s: digest %.12s, a clean run's %.12s", t.ID, t.Digest, d))
			}
			for _, f := range t.Files {
				if inline[f] {
					continue // kept in job.db
				}
				if _, err := os.Stat(filepath.Join(outDir, filepath.FromSlash(f))); err != nil {
					errs = append(errs, fmt.Errorf("task %s: output %s: %w", t.ID, f, err))
				}
			}
		case report.TaskFailed:
			failed++
		}
	}
	if rep.Summary.Total != len(rep.Tasks) || rep.Summary.Done != done || rep.Summary.Failed != failed {
		errs = append(errs, fmt.Errorf("summary %+v, tasks say total %d done %d failed %d", rep.Summary, len(rep.Tasks), done, failed))
	}
	if rep.State == report.StateComplete && done != len(rep.Tasks) {
		errs = append(errs, fmt.Errorf("job complete with %d of %d tasks done", done, len(rep.Tasks)))
	}
	if len(want) > 0 && rep.State == report.StateComplete {
		ids := make([]string, 0, len(rep.Tasks))
		for _, t := range rep.Tasks {
			ids = append(ids, t.ID)
		}
		for id := range want {
			if !slices.Contains(ids, id) {
				errs = append(errs, fmt.Errorf("task %s of the clean run missing", id))
			}
		}
	}
	return errors.Join(errs...)
}
