package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/cheggaaa/pb/v3/termutil"
	"github.com/mattn/go-isatty"

	"github.com/p2pc/p2pc/harness/bench"
)

// BenchCmd is `p2pc bench`: reproduce the seed papers' experiments with
// real p2pc processes in network namespaces under CPU quotas.
type BenchCmd struct {
	Setups  []int    `help:"Heterogeneous setups to run, by name (see the config file)." default:"2,3,4" sep:"," placeholder:"N"`
	Suite   []string `help:"Suites to run (mandelbrot, ga, tracker, latency, transfer, scale, chaos, takeover, replicate), or all (every suite but chaos, takeover and replicate, which run only when named)." default:"all" sep:"," placeholder:"NAME"`
	Runs    int      `help:"How many times the chaos suite runs each scenario, and how many owners the takeover suite kills (default: the config's, 10; 1 with --quick)." placeholder:"N"`
	Quick   bool     `help:"Tiny problem sizes, one round: a smoke check of every suite in under 3 minutes (figures mean nothing)."`
	Out     string   `help:"Results folder (default: a new folder under the system's temporary folder, printed)." type:"path" placeholder:"DIR"`
	Publish bool     `help:"Write into results/ of the repository, the published figures (full runs only: refused with --quick or --out)."`
	Config  string   `help:"Bench configuration (default: benchmarks/bench.yaml of the repository)." type:"path" placeholder:"FILE"`
	Mode    string   `help:"Lab mode: bridge (a namespace per peer on a bridge) or loopback (one namespace on 127.0.0.1); default from the config." enum:",bridge,loopback" default:""`
	Keep    bool     `help:"Keep the scratch folder (lab data, job outputs) and print where it is."`
	List    bool     `help:"List the suites and exit."`
}

// Run runs the suites and prints the table of headline figures.
func (c *BenchCmd) Run(g *Globals) error {
	if c.List {
		for _, s := range bench.Suites() {
			i := s.Info()
			fmt.Printf("%-12s %s (%s)\n", i.Name, i.Title, i.Paper)
		}
		return nil
	}
	prog := newBenchProgress(os.Stderr)
	defer prog.finish()
	out, err := bench.Run(g.Ctx, bench.Options{
		ConfigFile: c.Config,
		Setups:     c.Setups,
		Suites:     c.Suite,
		Quick:      c.Quick,
		Runs:       c.Runs,
		Out:        c.Out,
		Publish:    c.Publish,
		Mode:       c.Mode,
		Keep:       c.Keep,
		Progress:   prog,
		Logger:     g.Logger,
	})
	prog.finish()
	if out != nil {
		printBenchTable(out)
	}
	switch {
	case err == nil:
		return nil
	case g.Ctx.Err() != nil:
		return withCode(exitInterrupted, fmt.Errorf("bench: interrupted"))
	case errors.Is(err, bench.ErrOptions):
		return withCode(exitBadInput, err)
	case errors.Is(err, bench.ErrNoLab):
		return withCode(exitBadInput, fmt.Errorf("bench: %w\n(p2pc bench runs its peers in network namespaces with CPU quotas: run it as root on Linux with iproute2; mDNS never runs in the machine's own network namespace)", err))
	case out == nil:
		return withCode(exitBadInput, err)
	default:
		for name, ferr := range out.Failed {
			fmt.Fprintf(os.Stderr, "p2pc: bench: %s: %v\n", name, ferr)
		}
		return withCode(exitTaskFailed, err)
	}
}

func printBenchTable(out *bench.Outcome) {
	if len(out.Took) > 0 {
		fmt.Println("time per suite:")
		var total time.Duration
		for _, t := range out.Took {
			state := ""
			if t.Err != nil {
				state = " (failed)"
			}
			fmt.Printf("  %-12s %s%s\n", t.Suite, t.Took.Round(time.Second), state)
			total += t.Took
		}
		fmt.Printf("  %-12s %s\n", "total", total.Round(time.Second))
	}
	if len(out.Results) == 0 {
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SUITE\tSETUP\tMETRIC\tOURS\tPAPER")
	for _, r := range out.Results {
		for _, row := range r.Rows {
			paper := row.Paper
			if paper == "" {
				paper = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Suite, row.Setup, row.Metric, row.Value, paper)
		}
	}
	w.Flush()
	for _, r := range out.Results {
		for _, n := range r.Notes {
			fmt.Printf("note (%s): %s\n", r.Suite, n)
		}
	}
	fmt.Printf("results: %s (summary.md, report.html, machine.md, one folder per suite)\n", out.Out)
}

// benchProgress shows bench phases: a pb/v3 bar per phase on a terminal,
// plain lines otherwise. It implements bench.Progress.
type benchProgress struct {
	w   *os.File
	tty bool

	mu  sync.Mutex
	bar *pb.ProgressBar
}

func newBenchProgress(w *os.File) *benchProgress {
	return &benchProgress{w: w, tty: isatty.IsTerminal(w.Fd())}
}

func (p *benchProgress) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf(format, args...)
	if p.bar != nil {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *benchProgress) Phase(name string, total int) bench.Phase {
	p.mu.Lock()
	defer p.mu.Unlock()
	ph := &benchPhase{p: p, name: name, total: total, start: time.Now()}
	if p.tty {
		if p.bar != nil {
			p.bar.Finish()
		}
		tmpl := `{{string . "name"}} {{counters . }} {{bar . }} {{etime . }} {{string . "what"}}`
		p.bar = pb.New(total).SetTemplateString(tmpl).SetWriter(p.w).Set("name", name).Set("what", "starting").
			SetRefreshRate(500 * time.Millisecond)
		if w, err := termutil.TerminalWidth(); err != nil || w <= 0 {
			p.bar.SetWidth(100) // a terminal that does not say its width
		}
		p.bar.Start()
		ph.bar = p.bar
	}
	return ph
}

func (p *benchProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}

type benchPhase struct {
	p     *benchProgress
	bar   *pb.ProgressBar
	name  string
	total int
	n     int
	start time.Time
}

func (ph *benchPhase) Step(what string) {
	ph.p.mu.Lock()
	ph.n++
	if ph.bar != nil {
		ph.bar.Set("what", what).Increment()
		ph.p.mu.Unlock()
		return
	}
	ph.p.mu.Unlock()
	ph.p.Printf("%s [%d/%d] %s (%s)", ph.name, ph.n, ph.total, strings.TrimSpace(what), time.Since(ph.start).Round(100*time.Millisecond))
}

func (ph *benchPhase) Done() {
	ph.p.mu.Lock()
	defer ph.p.mu.Unlock()
	if ph.bar != nil && ph.p.bar == ph.bar {
		ph.bar.Finish()
		ph.p.bar = nil
	}
}
