package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Suite is one reproduced experiment. A suite plugs in by registering
// itself from an init function in a file of this package:
//
//	func init() { Register(gaSuite{}) }
//
// Run gets an Env holding everything a suite needs: the p2pc binary, the
// selected heterogeneous setups, its own section of benchmarks/bench.yaml,
// labs, a results folder of its own and progress reporting. It writes its
// files (raw JSON, CSV, SVG, summary.md) into env.OutDir and returns the
// rows of the final table; the runner writes rows.json next to them and
// rebuilds results/summary.md from every suite's rows.json.
type Suite interface {
	Info() Info
	Run(ctx context.Context, env *Env) (*Result, error)
}

// Info describes a suite.
type Info struct {
	// Name selects the suite on the command line (--suite NAME).
	Name string
	// Folder is its folder under the results folder (default Name).
	Folder string
	// Title is a one-line description, Paper what it reproduces
	// ("Preon 4.1", "Fenech & Vella 5").
	Title, Paper string
	// Order sorts the suites in "all" and in the summary (low first).
	Order int
	// Setups: the suite runs the heterogeneous setups of --setups.
	Setups bool
	// Explicit: "all" leaves the suite out; it runs only when named.
	Explicit bool
}

// Result is what a suite reports for the final table.
type Result struct {
	Suite string `json:"suite"`
	Title string `json:"title"`
	Paper string `json:"paper"`
	Quick bool   `json:"quick"`
	// Rows are the headline figures: ours beside the paper's.
	Rows []Row `json:"rows"`
	// Notes say how the experiment was scaled to this machine, what was
	// skipped and why.
	Notes []string `json:"notes,omitempty"`
	// Files are the files written, relative to the suite's folder.
	Files []string `json:"files,omitempty"`
	// From is the run that wrote these rows (nil in rows.json files
	// written before runs were recorded).
	From *RunStamp `json:"from,omitempty"`
}

// RunStamp says which run of p2pc bench wrote a suite's rows, and when.
type RunStamp struct {
	// Run is the run's ID: when it started, UTC (Machine.Run).
	Run string `json:"run"`
	// Date is when the suite started.
	Date    time.Time `json:"date"`
	Commit  string    `json:"commit,omitempty"`
	Dirty   bool      `json:"dirty,omitempty"`
	Command string    `json:"command,omitempty"`
}

// Describe says in a sentence where the rows come from, and whether that
// is a run other than current (a summary rebuilt from every suite's
// folder mixes runs).
func (s *RunStamp) Describe(current string) (text string, other bool) {
	if s == nil {
		return "From an earlier run that did not record itself (its rows.json predates run stamps): see the suite's summary.md for its date.", true
	}
	commit := s.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if s.Dirty {
		commit += " with uncommitted changes"
	}
	text = fmt.Sprintf("From run %s (%s; commit %s), this suite started %s.", s.Run, s.Command, commit, s.Date.UTC().Format("2006-01-02 15:04 UTC"))
	if s.Run != current {
		return text + " An earlier run than " + current + ", which wrote this page.", true
	}
	return text, false
}

// Row is one line of the final table.
type Row struct {
	Setup  string `json:"setup,omitempty"` // "2 peers (0.9+0.6 cores)", "p2pc", "GNU parallel", ...
	Metric string `json:"metric"`
	Value  string `json:"value"`
	Paper  string `json:"paper,omitempty"` // the paper's figure, if it has one
}

// Add appends a row.
func (r *Result) Add(setup, metric, value, paper string) {
	r.Rows = append(r.Rows, Row{Setup: setup, Metric: metric, Value: value, Paper: paper})
}

// Note appends a note.
func (r *Result) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

var (
	regMu    sync.Mutex
	registry = map[string]Suite{}
)

// Register adds a suite. It panics on an empty or duplicate name: both
// are programming errors found at start-up.
func Register(s Suite) {
	regMu.Lock()
	defer regMu.Unlock()
	name := s.Info().Name
	if name == "" || name == "all" {
		panic(fmt.Sprintf("bench: invalid suite name %q", name))
	}
	if _, dup := registry[name]; dup {
		panic("bench: suite registered twice: " + name)
	}
	registry[name] = s
}

// Suites returns the registered suites in their order.
func Suites() []Suite {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Suite, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Info(), out[j].Info()
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Name < b.Name
	})
	return out
}

// Names lists the registered suites' names in order.
func Names() []string {
	var out []string
	for _, s := range Suites() {
		out = append(out, s.Info().Name)
	}
	return out
}

// Select resolves --suite values: names, or "all" (every suite but the
// Explicit ones, which run only when named).
func Select(names []string) ([]Suite, error) {
	if len(names) == 0 || slices.Contains(names, "all") {
		var out []Suite
		for _, s := range Suites() {
			if !s.Info().Explicit || slices.Contains(names, s.Info().Name) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	regMu.Lock()
	var out []Suite
	var unknown []string
	for _, n := range names {
		if s, ok := registry[n]; ok {
			if !slices.ContainsFunc(out, func(x Suite) bool { return x.Info().Name == n }) {
				out = append(out, s)
			}
		} else {
			unknown = append(unknown, n)
		}
	}
	regMu.Unlock()
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown suite %v (have: %v, or all)", unknown, Names())
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Info().Order < out[j].Info().Order })
	return out, nil
}

func folderOf(s Suite) string {
	if f := s.Info().Folder; f != "" {
		return f
	}
	return s.Info().Name
}
