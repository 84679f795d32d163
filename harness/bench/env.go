package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// Progress shows a run's phases: a bar on a terminal, plain lines
// otherwise (the CLI supplies it; see LineProgress).
type Progress interface {
	// Phase starts a phase of total steps.
	Phase(name string, total int) Phase
	// Printf prints a line (between bars).
	Printf(format string, args ...any)
}

// Phase is a running phase.
type Phase interface {
	// Step marks one step done; what describes the next one.
	Step(what string)
	// Done ends the phase.
	Done()
}

// Env is what a suite runs with.
type Env struct {
	// Bin is the p2pc binary; Root the repository (plugins/, benchmarks/).
	Bin, Root string
	Config    *Config
	// Setups are the heterogeneous setups selected with --setups.
	Setups []Setup
	// Quick: tiny problem sizes, a smoke check.
	Quick bool
	// Runs is how many times a suite that repeats runs (chaos: each
	// scenario); 0: the suite's config decides.
	Runs int
	// OutDir is the suite's own results folder; WorkDir a scratch folder
	// (removed after the run).
	OutDir, WorkDir string
	Progress        Progress
	Log             *slog.Logger
	Machine         Machine

	shared *shared
}

// shared is state every suite of a run shares.
type shared struct {
	mode       harness.Mode
	submitData string       // one --data for every submitter: plugins built once
	seq        atomic.Int64 // numbers the fresh jobs (freshJob)

	mu       sync.Mutex
	fellBack bool
	plugins  map[string]string // built plugin executables by package name
}

// Mode is the mode labs are built in.
func (e *Env) Mode() harness.Mode {
	e.shared.mu.Lock()
	defer e.shared.mu.Unlock()
	return e.shared.mode
}

// Plugin builds a bundled plugin (plugins/NAME) once per run and returns
// the executable's path, for job specs. (A spec naming the package folder
// works too, but p2pc run then checks the build cache on every run: half
// a second a job.)
func (e *Env) Plugin(ctx context.Context, name string) (string, error) {
	e.shared.mu.Lock()
	defer e.shared.mu.Unlock()
	if p, ok := e.shared.plugins[name]; ok {
		return p, nil
	}
	out := filepath.Join(filepath.Dir(e.WorkDir), "plugins", name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./plugins/"+name)
	cmd.Dir = e.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build plugin %s: %w\n%s", name, err, b)
	}
	if e.shared.plugins == nil {
		e.shared.plugins = map[string]string{}
	}
	e.shared.plugins[name] = out
	return out, nil
}

// Benchmarks is the path of a file under benchmarks/.
func (e *Env) Benchmarks(rel string) string { return filepath.Join(e.Root, "benchmarks", rel) }

// NewLab builds a lab of peers in the run's mode. If a bridge cannot be
// built it falls back to Loopback mode once, says so, and builds every
// later lab that way.
func (e *Env) NewLab(ctx context.Context, peers []harness.PeerSpec) (*harness.Lab, error) {
	return e.newLab(ctx, peers, nil)
}

// newLab is NewLab with the lab's configuration adjusted by with (if set).
func (e *Env) newLab(ctx context.Context, peers []harness.PeerSpec, with func(*harness.LabConfig)) (*harness.Lab, error) {
	// Labs are torn down often: a short grace after SIGTERM, then kill.
	// Priority: the machine may be shared; the lab's processes come first.
	cfg := harness.LabConfig{Bin: e.Bin, Peers: peers, Mode: e.Mode(), Logger: e.Log, StopGrace: time.Second, Priority: true}
	if with != nil {
		with(&cfg)
	}
	dir, err := os.MkdirTemp(e.WorkDir, "lab-")
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	cfg.Dir = dir
	lab, err := harness.NewLab(ctx, cfg)
	if err == nil || cfg.Mode != harness.Bridge || ctx.Err() != nil {
		return lab, err
	}
	e.shared.mu.Lock()
	e.shared.mode, e.shared.fellBack = harness.Loopback, true
	e.shared.mu.Unlock()
	e.Progress.Printf("bridge lab failed (%v); falling back to loopback mode", firstLine(err.Error()))
	cfg.Mode = harness.Loopback
	return harness.NewLab(ctx, cfg)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Submit runs a job spec in a lab, into a fresh output folder under the
// work folder, with the run's shared submitter data folder.
func (e *Env) Submit(ctx context.Context, lab *harness.Lab, spec string, o harness.SubmitOptions) (*harness.Submission, error) {
	out, err := os.MkdirTemp(e.WorkDir, "out-")
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	if err := os.Remove(out); err != nil { // p2pc run makes it
		return nil, fmt.Errorf("submit: %w", err)
	}
	o.Spec, o.Out, o.Data = spec, out, e.shared.submitData
	sub, err := lab.Submit(ctx, o)
	if err == nil {
		if rerr := checkComplete(sub.Report); rerr != nil {
			return sub, rerr
		}
	}
	return sub, err
}

func checkComplete(rep *report.Report) error {
	if rep.State != report.StateComplete || rep.Summary.Done != rep.Summary.Total {
		return fmt.Errorf("job %s: state %s, %d of %d tasks done: %s", rep.Name, rep.State, rep.Summary.Done, rep.Summary.Total, rep.Error)
	}
	return nil
}

// JobSpec is a job spec the suites write (see docs/spec.md).
type JobSpec struct {
	Name    string         `yaml:"name"`
	Plugin  string         `yaml:"plugin"`
	Params  map[string]any `yaml:"params,omitempty"`
	Tasks   []any          `yaml:"tasks"`
	Timeout string         `yaml:"timeout,omitempty"`
	Retries int            `yaml:"retries,omitempty"`
	Reduce  bool           `yaml:"reduce,omitempty"`
	Batch   any            `yaml:"batch,omitempty"` // "off" or {max: N}; unset: adaptive
}

// Range is a task entry of n tasks with param = 0..n-1.
func Range(param string, n int) any {
	return map[string]any{"range": map[string]any{"param": param, "from": 0, "to": n - 1}}
}

// WriteSpec writes a job spec into the work folder as name.yaml and
// returns its path.
func (e *Env) WriteSpec(name string, j JobSpec) (string, error) {
	b, err := yaml.Marshal(j)
	if err != nil {
		return "", fmt.Errorf("write spec %s: %w", name, err)
	}
	path := filepath.Join(e.WorkDir, name+".yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("write spec %s: %w", name, err)
	}
	return path, nil
}

// KeepSpec copies a spec into the results folder, so readers see exactly
// what ran.
func (e *Env) KeepSpec(path, as string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("keep spec: %w", err)
	}
	b = []byte(strings.ReplaceAll(string(b), filepath.Dir(e.WorkDir)+string(filepath.Separator), "<scratch>/"))
	return os.WriteFile(filepath.Join(e.OutDir, as), b, 0o644)
}

// Span is the busy part of a job: from the first lease the coordinator
// issued to the last accepted result, from report.json.
type Span struct {
	First, Last time.Time
	Tasks       int
}

// Makespan is Last - First.
func (s Span) Makespan() time.Duration { return s.Last.Sub(s.First) }

// Rate is tasks per second over the makespan.
func (s Span) Rate() float64 {
	if d := s.Makespan(); d > 0 {
		return float64(s.Tasks) / d.Seconds()
	}
	return 0
}

// SpanOf reads a report's span. Attempt start is when the coordinator
// issued the lease; attempt end is when the peer finished the task (the
// lab's processes share one clock).
func SpanOf(rep *report.Report) Span {
	var s Span
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if s.First.IsZero() || a.Start.Before(s.First) {
				s.First = a.Start
			}
			if a.Outcome == report.OutcomeOK && a.End.After(s.Last) {
				s.Last = a.End
			}
		}
		if t.State == report.TaskDone {
			s.Tasks++
		}
	}
	return s
}

// Shares counts accepted results per peer, sorted by name.
func Shares(rep *report.Report) map[string]int {
	m := map[string]int{}
	for _, t := range rep.Tasks {
		if t.Peer != "" {
			m[t.Peer]++
		}
	}
	return m
}

// Latency is one task's dispatch-to-result time.
type Latency struct {
	Task     string        `json:"task"`
	Peer     string        `json:"peer"`
	Dispatch time.Duration `json:"dispatch_ns"`   // since the job's first dispatch
	Run      int           `json:"run,omitempty"` // the round, where a measure pools several runs
	Latency  time.Duration `json:"latency_ns"`
}

// Latencies returns every accepted attempt's latency (lease issued to
// task finished on the peer), sorted by dispatch time.
func Latencies(rep *report.Report) []Latency {
	span := SpanOf(rep)
	var out []Latency
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if a.Outcome != report.OutcomeOK {
				continue
			}
			out = append(out, Latency{Task: t.ID, Peer: a.Peer, Dispatch: a.Start.Sub(span.First), Latency: a.End.Sub(a.Start)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dispatch < out[j].Dispatch })
	return out
}

// errSkip marks a comparator that is not installed.
var errSkip = errors.New("skipped")
