package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// RunCmd is `p2pc run`.
type RunCmd struct {
	Spec       string        `arg:"" help:"Job spec (YAML)." type:"path" placeholder:"JOB.yaml"`
	Out        string        `help:"Output folder (default: the spec's 'output')." type:"path" placeholder:"DIR"`
	LocalSlots int           `name:"local-slots" aliases:"slots" help:"Tasks run at once on this machine (default: number of CPUs; 0: only peers run tasks)." default:"-1" placeholder:"N"`
	Join       []string      `help:"Peers to use (gRPC addresses host:port), besides those found with mDNS." sep:"," placeholder:"ADDR,..."`
	NoMDNS     bool          `name:"no-mdns" env:"P2PC_NO_MDNS" help:"Do not look for peers with mDNS."`
	MinPeers   int           `help:"Hand out no task before this many peers have enrolled (for verified jobs and benchmarks)." placeholder:"N"`
	WaitPeers  bool          `name:"wait-peers" help:"When no peer can take the work left, keep waiting for one (saying why every --stall-after) instead of failing with exit code 3."`
	StallAfter time.Duration `name:"stall-after" help:"How long work may be left with nothing running before the run says why and fails (exit code 3)." default:"30s" placeholder:"DURATION"`
	Strikes    int           `help:"Faults (malformed results; lost attempts in a row) that exclude a peer from the job." default:"3" placeholder:"N"`
	MaxLost    int           `name:"max-lost" help:"Lost attempts (peer gone, lease expired, malformed result) after which a task fails." default:"5" placeholder:"N"`
	Listen     string        `help:"gRPC listen address of this submitter's node (peers fetch the plugin and inputs from it)." default:"0.0.0.0:0" placeholder:"ADDR"`
	JSON       bool          `help:"Print report.json on stdout when the job ends."`
	Force      bool          `help:"Write into an output folder that holds another job's results (replacing them) or other files."`
	NoProgress bool          `help:"Do not show a progress bar (plain progress lines still go to stderr)."`
}

// Run parses, prepares and runs the job, then prints a summary.
func (c *RunCmd) Run(g *Globals) error {
	ctx := g.Ctx
	js, err := spec.ParseFile(c.Spec)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	slots := c.LocalSlots
	if slots < 0 {
		slots = runtime.NumCPU()
	}
	p, err := job.Prepare(ctx, js, job.PrepareOptions{
		OutDir:   c.Out,
		CacheDir: filepath.Join(g.Data, "plugins"),
		Force:    c.Force,
		Logger:   g.Logger,
	})
	if err != nil {
		return classifyJobErr(ctx.Err(), err)
	}
	defer p.Release()
	if c.MinPeers > 0 && c.NoMDNS && len(c.Join) == 0 {
		return withCode(exitBadInput, fmt.Errorf("--min-peers %d: no way to find peers (--no-mdns and no --join)", c.MinPeers))
	}
	sw, err := startSwarm(ctx, g, c)
	if err != nil {
		return err
	}
	defer sw.stop()
	prog := newProgress(os.Stderr, js.Name, !c.NoProgress)
	start := time.Now()
	rep, runErr := job.Run(ctx, p, job.RunOptions{
		Slots:      slots,
		Node:       sw.name,
		Events:     prog,
		Logger:     g.Logger,
		Remote:     sw.remote,
		MinPeers:   c.MinPeers,
		Strikes:    c.Strikes,
		MaxLost:    c.MaxLost,
		StallAfter: c.StallAfter,
		WaitPeers:  c.WaitPeers,
		TrustFile:  filepath.Join(g.Data, "trust.json"),
	})
	prog.Finish()
	if rep != nil {
		if c.JSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return withCode(exitInternal, fmt.Errorf("print report: %w", err))
			}
		}
		printSummary(rep, p.OutDir, time.Since(start))
	}
	if runErr != nil {
		return classifyJobErr(ctx.Err(), runErr)
	}
	return nil
}

func classifyJobErr(ctxErr, err error) error {
	switch {
	case ctxErr != nil:
		return withCode(exitInterrupted, fmt.Errorf("interrupted: %w", err))
	case errors.Is(err, job.ErrLocalDisk):
		return withCode(exitLocalDisk, err)
	case errors.Is(err, job.ErrBadInput):
		return withCode(exitBadInput, err)
	case errors.Is(err, job.ErrTasksFailed):
		return withCode(exitTaskFailed, err)
	default:
		return withCode(exitInternal, err)
	}
}

func printSummary(rep *report.Report, out string, took time.Duration) {
	w := os.Stderr
	fmt.Fprintf(w, "job %s (%.12s) %s: %d/%d tasks done", rep.Name, rep.JobID, rep.State, rep.Summary.Done, rep.Summary.Total)
	if rep.Summary.Failed > 0 {
		fmt.Fprintf(w, ", %d failed", rep.Summary.Failed)
	}
	fmt.Fprintf(w, " in %s\n", took.Round(time.Millisecond))
	if share := peerShares(rep); share != "" {
		fmt.Fprintf(w, "  ran on: %s\n", share)
	}
	if sc := rep.SpotChecks; sc != nil {
		fmt.Fprintf(w, "  spot checks: %d re-run on this machine, %d caught a wrong result", sc.Checked, len(sc.Caught))
		var liars []string
		for _, c := range sc.Caught {
			for _, p := range c.Peers {
				if !slices.Contains(liars, p) {
					liars = append(liars, p)
				}
			}
		}
		if len(liars) > 0 {
			fmt.Fprintf(w, "; excluded as liars: %s", strings.Join(liars, ", "))
		}
		if len(sc.Reinstated) > 0 {
			fmt.Fprintf(w, "; reinstated (outvoted by them): %s", strings.Join(sc.Reinstated, ", "))
		}
		fmt.Fprintln(w)
	}
	if rep.Summary.Failed > 0 {
		shown := 0
		for _, t := range rep.Tasks {
			if t.State != report.TaskFailed || len(t.Attempts) == 0 {
				continue
			}
			if shown == 5 {
				fmt.Fprintf(w, "  ... see %s\n", filepath.Join(out, report.FileName))
				break
			}
			last := t.Attempts[len(t.Attempts)-1]
			why := last.Error
			if strings.HasPrefix(t.Verdict, "failed: ") {
				why = strings.TrimPrefix(t.Verdict, "failed: ")
			}
			fmt.Fprintf(w, "  task %s: %s after %d attempts: %s\n", t.ID, last.Outcome, len(t.Attempts), firstLine(why))
			shown++
		}
	}
	for _, o := range rep.Outputs {
		fmt.Fprintf(w, "  output: %s\n", filepath.Join(out, o))
	}
	fmt.Fprintf(w, "  report: %s\n", filepath.Join(out, report.FileName))
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// peerShares says how many accepted results each peer produced, biggest
// share first: "host-a 40, host-b 24".
func peerShares(rep *report.Report) string {
	count := map[string]int{}
	for _, t := range rep.Tasks {
		if t.Peer != "" {
			count[t.Peer]++
		}
	}
	names := make([]string, 0, len(count))
	for n := range count {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, count[n])
	}
	return strings.Join(parts, ", ")
}
