package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// ErrNoLab: labs cannot be built here (not root, no iproute2, not Linux).
var ErrNoLab = errors.New("cannot build a lab")

// Options configure Run.
type Options struct {
	// Root is the repository (plugins/, benchmarks/); default: found
	// from the working directory.
	Root string
	// Bin is the p2pc binary; default: built from Root.
	Bin string
	// ConfigFile defaults to Root/benchmarks/bench.yaml.
	ConfigFile string
	// Setups selects setups by name (default: all of the config).
	Setups []int
	// Suites selects suites by name (default: all).
	Suites []string
	Quick  bool
	// Runs is how many times repeating suites run (chaos: each
	// scenario); 0: the config's.
	Runs int
	// Out is the results folder. Default: a new folder under the
	// system's temporary folder (p2pc-bench-RUN-*), so that no run
	// rewrites the published figures by accident.
	Out string
	// Publish writes into Root/results, the repository's published
	// figures; refused with Quick or with Out.
	Publish bool
	// Mode overrides the config's lab mode ("bridge", "loopback").
	Mode string
	// Keep keeps the scratch folder (printed) instead of removing it.
	Keep     bool
	Progress Progress
	Logger   *slog.Logger
}

// Outcome is what a run did.
type Outcome struct {
	Machine Machine
	Results []*Result
	// Failed maps a suite that failed to its error.
	Failed map[string]error
	Out    string
	// Took is how long each suite ran (failed ones too), in run order.
	Took []SuiteTime
}

// SuiteTime is how long one suite ran.
type SuiteTime struct {
	Suite string
	Took  time.Duration
	Err   error
}

// Run runs the selected suites and writes their results, machine.json,
// machine.md and summary.md into the results folder. A failing suite
// does not stop the others; the error then says which failed.
func Run(ctx context.Context, o Options) (*Outcome, error) {
	if err := o.checkOut(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = LineProgress(os.Stderr)
	}
	if err := harness.LabAvailable(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoLab, err)
	}
	if o.Root == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			return nil, fmt.Errorf("bench: %w (run p2pc bench inside the p2pc repository: it needs plugins/ and benchmarks/)", err)
		}
		o.Root = root
	}
	if o.ConfigFile == "" {
		o.ConfigFile = filepath.Join(o.Root, DefaultConfig)
	}
	if o.Publish {
		o.Out = filepath.Join(o.Root, "results")
	}
	cfg, err := LoadConfig(o.ConfigFile, runtime.NumCPU())
	if err != nil {
		return nil, err
	}
	setups, err := cfg.SelectSetups(o.Setups)
	if err != nil {
		return nil, err
	}
	suites, err := Select(o.Suites)
	if err != nil {
		return nil, err
	}
	modeName := o.Mode
	if modeName == "" {
		modeName = cfg.Mode
	}
	mode := harness.Bridge
	if modeName != "" {
		if mode, err = harness.ParseMode(modeName); err != nil {
			return nil, err
		}
	}
	for _, s := range setups {
		o.Progress.Printf("setup %d: %s = %.2f of %d cores under quota, %.2f left for the coordinator and the system",
			s.Name, s.Label(), s.Total(), runtime.NumCPU(), float64(runtime.NumCPU())-s.Total())
	}

	// The driver samples the labs' processes while they keep every core
	// busy: it must not starve behind them.
	if undo, err := harness.PrioritiseSelf(); err != nil {
		o.Logger.Warn("cannot prioritise the bench process", "err", err)
	} else {
		defer func() {
			if err := undo(); err != nil {
				o.Logger.Warn("leave the bench cgroup", "err", err)
			}
		}()
	}

	work, err := os.MkdirTemp("", "p2pc-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if o.Keep {
		o.Progress.Printf("scratch folder kept: %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	if o.Bin == "" {
		o.Bin = filepath.Join(work, "p2pc")
		o.Progress.Printf("building p2pc")
		if err := harness.Build(ctx, o.Root, o.Bin, false); err != nil {
			return nil, err
		}
	}
	machine := DescribeMachine(ctx, o.Root)
	machine.Quick = o.Quick
	if o.Out == "" {
		if o.Out, err = os.MkdirTemp("", "p2pc-bench-"+machine.Run+"-"); err != nil {
			return nil, fmt.Errorf("bench: results folder: %w", err)
		}
	} else if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	o.Progress.Printf("run %s: results into %s", machine.Run, o.Out)
	sh := &shared{mode: mode, submitData: filepath.Join(work, "submitter")}
	out := &Outcome{Machine: machine, Failed: map[string]error{}, Out: o.Out}

	for _, s := range suites {
		if ctx.Err() != nil {
			break
		}
		info := s.Info()
		env := &Env{
			Bin: o.Bin, Root: o.Root, Config: cfg, Setups: setups, Quick: o.Quick, Runs: o.Runs,
			OutDir:   filepath.Join(o.Out, folderOf(s)),
			WorkDir:  filepath.Join(work, info.Name),
			Progress: o.Progress,
			Log:      o.Logger.With("suite", info.Name),
			Machine:  machine,
			shared:   sh,
		}
		o.Progress.Printf("== %s: %s (%s)", info.Name, info.Title, info.Paper)
		start := time.Now()
		res, err := runSuite(ctx, s, env)
		took := time.Since(start)
		out.Took = append(out.Took, SuiteTime{Suite: info.Name, Took: took, Err: err})
		o.Progress.Printf("== %s took %s", info.Name, took.Round(time.Second))
		if err != nil {
			out.Failed[info.Name] = err
			o.Progress.Printf("%s failed: %v", info.Name, err)
			continue
		}
		out.Results = append(out.Results, res)
	}

	sh.mu.Lock()
	machine.LabMode = sh.mode.String()
	if sh.fellBack {
		machine.LabMode += " (bridge failed, fell back)"
	}
	sh.mu.Unlock()
	machine.LoadEnd = loadavg()
	out.Machine = machine
	if err := writeTop(o.Out, machine); err != nil {
		return out, err
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if len(out.Failed) > 0 {
		var names []string
		for n := range out.Failed {
			names = append(names, n)
		}
		sort.Strings(names)
		return out, fmt.Errorf("bench: suites failed: %s", strings.Join(names, ", "))
	}
	return out, nil
}

// ErrOptions: the options contradict each other.
var ErrOptions = errors.New("bench: options")

// checkOut refuses the results folder options that contradict each other.
func (o *Options) checkOut() error {
	switch {
	case o.Publish && o.Out != "":
		return fmt.Errorf("%w: --publish writes the repository's results/, --out names another folder: give one", ErrOptions)
	case o.Publish && o.Quick:
		return fmt.Errorf("%w: --publish takes full runs only: a --quick run's figures mean nothing (keep one with --out DIR)", ErrOptions)
	}
	return nil
}

func runSuite(ctx context.Context, s Suite, env *Env) (*Result, error) {
	if err := os.RemoveAll(env.OutDir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", env.OutDir, err)
	}
	for _, d := range []string{env.OutDir, env.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res, err := s.Run(ctx, env)
	if err != nil {
		return nil, err
	}
	info := s.Info()
	res.Suite, res.Title, res.Paper, res.Quick = info.Name, info.Title, info.Paper, env.Quick
	res.From = &RunStamp{Run: env.Machine.Run, Date: start.UTC().Truncate(time.Second),
		Commit: env.Machine.Commit, Dirty: env.Machine.Dirty, Command: env.Machine.Command}
	res.Note("took %s on this machine%s", time.Since(start).Round(time.Second), map[bool]string{true: " (--quick)", false: ""}[env.Quick])
	entries, _ := os.ReadDir(env.OutDir)
	res.Files = nil
	for _, e := range entries {
		res.Files = append(res.Files, e.Name())
	}
	res.Files = append(res.Files, "rows.json")
	sort.Strings(res.Files)
	if err := env.WriteJSON("rows.json", res); err != nil {
		return nil, err
	}
	return res, nil
}

// writeTop writes machine.json, machine.md, summary.md and report.html (from every
// suite folder's rows.json, so that a run of one suite keeps the others'
// rows).
func writeTop(out string, m Machine) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "machine.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write machine.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "machine.md"), []byte(m.Markdown()), 0o644); err != nil {
		return fmt.Errorf("write machine.md: %w", err)
	}
	var results []*Result
	dirs := map[*Result]string{} // the folder each came from
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "rows.json"))
		if err != nil {
			continue
		}
		var r Result
		if json.Unmarshal(b, &r) == nil {
			results = append(results, &r)
			dirs[&r] = filepath.Join(out, e.Name())
		}
	}
	order := map[string]int{}
	for _, s := range Suites() {
		order[s.Info().Name] = s.Info().Order
	}
	sort.SliceStable(results, func(i, j int) bool { return order[results[i].Suite] < order[results[j].Suite] })
	var md Markdown
	md.P("# p2pc bench: summary")
	md.P("Written by `p2pc bench` from each suite's `rows.json`; the machine is in [machine.md](machine.md), what the files are in [README.md](README.md). Each suite's folder has its own summary.md with the details and the paper's figures beside ours.")
	md.P("This summary was written by run %s; a section from another run says so.", m.Run)
	for _, r := range results {
		quick := ""
		if r.Quick {
			quick = " — **--quick run (smoke check, not a measurement)**"
		}
		md.P("## %s: %s (%s)%s", r.Suite, r.Title, r.Paper, quick)
		from, earlier := r.From.Describe(m.Run)
		if earlier {
			from = "**" + from + "**"
		}
		md.P("%s", from)
		md.Table([]string{"setup", "metric", "ours", "paper"}, rowsOf(r))
		for _, n := range r.Notes {
			md.WriteString("- " + n + "\n")
		}
		md.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("write summary.md: %w", err)
	}
	return writeHTML(out, m, results, dirs, time.Now())
}

func rowsOf(r *Result) [][]string {
	var rows [][]string
	for _, x := range r.Rows {
		paper := x.Paper
		if paper == "" {
			paper = "–"
		}
		rows = append(rows, []string{x.Setup, x.Metric, x.Value, paper})
	}
	return rows
}

// LineProgress prints phases as plain lines on w.
func LineProgress(w *os.File) Progress { return &lineProgress{w: w} }

type lineProgress struct{ w *os.File }

func (p *lineProgress) Printf(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *lineProgress) Phase(name string, total int) Phase {
	return &linePhase{p: p, name: name, total: total, start: time.Now()}
}

type linePhase struct {
	p     *lineProgress
	name  string
	total int
	n     int
	start time.Time
}

func (ph *linePhase) Step(what string) {
	ph.n++
	ph.p.Printf("%s [%d/%d] %s (%s)", ph.name, ph.n, ph.total, what, time.Since(ph.start).Round(100*time.Millisecond))
}

func (ph *linePhase) Done() {}
