package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/internal/webui"
	"github.com/p2pc/p2pc/spec"
)

// RunCmd is `p2pc run`.
type RunCmd struct {
	Spec        string        `arg:"" optional:"" help:"Job spec (YAML)." type:"path" placeholder:"JOB.yaml"`
	Out         string        `help:"Output folder (default: the spec's 'output')." type:"path" placeholder:"DIR"`
	LocalSlots  int           `name:"local-slots" aliases:"slots" help:"Tasks run at once on this machine (default: number of CPUs; 0: only peers run tasks)." default:"-1" placeholder:"N"`
	Join        []string      `help:"Peers to use (host or host:port; port 7070 when none is given), besides those found with mDNS." sep:"," placeholder:"ADDR"`
	NoMDNS      bool          `name:"no-mdns" env:"P2PC_NO_MDNS" help:"Do not look for peers with mDNS."`
	MinPeers    int           `help:"Hand out no task before this many peers have enrolled (for verified jobs and benchmarks)." placeholder:"N"`
	WaitPeers   time.Duration `name:"wait-peers" help:"How long to wait for a peer while none can take the work left (none found, or each refused or excluded) before failing with exit code 3 (default ${default}); 0: wait for ever." default:"1m" placeholder:"DURATION"`
	StallAfter  time.Duration `name:"stall-after" help:"How long work may be left with nothing running before the run says why (and again every DURATION while it waits for peers; default ${default})." default:"30s" placeholder:"DURATION"`
	Strikes     int           `help:"Faults (malformed results; lost attempts in a row) that exclude a peer from the job." default:"3" placeholder:"N"`
	MaxLost     int           `name:"max-lost" help:"Lost attempts (peer gone, lease expired, malformed result) after which a task fails." default:"5" placeholder:"N"`
	Listen      string        `help:"gRPC listen address of this submitter's node (peers fetch the plugin and inputs from it)." default:"0.0.0.0:0" placeholder:"ADDR"`
	JSON        bool          `help:"Print report.json on stdout when the job ends."`
	Force       bool          `help:"Write into an output folder that holds a job of another name (keeping the tasks whose keys match, letting the rest go) or other files. An edited job of the same name needs no --force."`
	NoProgress  bool          `help:"Do not show a progress bar (plain progress lines still go to stderr)."`
	TaskUser    string        `name:"task-user" env:"P2PC_TASK_USER" help:"When run as root: the account local tasks run as (default: p2pc-task if it exists, else nobody; never root). Not root: tasks run as you." placeholder:"USER"`
	Detach      bool          `help:"Hand the job to the swarm: a member of it ('p2pc join') owns it and runs it; print the job ID and its owner and exit once the job is held by two members or more ('p2pc jobs', 'attach', 'fetch', 'cancel')."`
	NoReplicate bool          `name:"no-replicate" env:"P2PC_NO_REPLICATE" help:"With peers present, do not copy the job's journal to two members as it runs (by default they finish the job if this process dies, and the same command run again attaches to it)."`
	// ReplicateAfter: the journal is copied once the job has run this long.
	ReplicateAfter time.Duration `name:"replicate-after" hidden:"" default:"1s" help:"Copy the job's journal to members once it has run this long (a shorter job is as quick to run again)."`
	UI             string        `name:"ui" help:"Serve the live web view of the job on ADDR (bare --ui: 127.0.0.1:7480). Off loopback it needs the token in the URL printed." placeholder:"ADDR"`
	// TracePhases prints when each phase of the command ends.
	TracePhases bool `name:"trace-phases" hidden:"" help:"Print on stderr when each phase of the run ends, from exec to exit."`
}

// Run parses, prepares and runs the job, then prints a summary.
func (c *RunCmd) Run(g *Globals) error {
	ctx, cancel := context.WithCancel(g.Ctx) // the web view's cancel button
	defer cancel()
	tr := newPhaseTrace(os.Stderr, c.TracePhases)
	phasetrace.At("c.exec", 0, execStart)
	defer tr.mark("run returns")
	tr.mark("flags parsed")
	if c.Spec == "" {
		return withCode(exitBadInput, errors.New("run: which job? Give a job spec (YAML file), e.g. 'p2pc run examples/echo.yaml'; 'p2pc run --help' lists the flags"))
	}
	sandboxOffWarning()
	js, err := spec.ParseFile(c.Spec)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	tr.mark("spec parsed")
	if c.Detach && len(js.Stages) > 0 {
		return withCode(exitBadInput, errors.New("--detach does not carry a job with stages yet: run it without --detach"))
	}
	if c.Detach && js.Spawn != nil {
		return withCode(exitBadInput, errors.New("--detach does not carry a job whose tasks spawn yet: run it without --detach"))
	}
	if c.Detach {
		return c.detach(g, js)
	}
	taskUser, err := sandbox.TaskUser(c.TaskUser)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--task-user: %w", err))
	}
	slots := c.LocalSlots
	if slots < 0 {
		slots = runtime.NumCPU()
	}
	if slots > 0 {
		// The sandbox's first start (probes, a network namespace, the
		// cgroup tree) overlaps preparing the job and starting the swarm.
		defer sandbox.Warm()()
	}
	if c.MinPeers > 0 && c.NoMDNS && len(c.Join) == 0 {
		return withCode(exitBadInput, fmt.Errorf("--min-peers %d: no way to find peers (--no-mdns and no --join)", c.MinPeers))
	}
	if slots == 0 && c.NoMDNS && len(c.Join) == 0 {
		return withCode(exitBadInput, errors.New("--local-slots 0 runs no task on this machine, and with --no-mdns and no --join no peer can ever be found: give --join ADDR, allow mDNS, or give local slots"))
	}
	if len(js.Stages) > 0 {
		return c.runGraph(ctx, cancel, g, js, slots, taskUser, tr)
	}
	if js.Spawn != nil {
		return c.runFork(ctx, g, js, slots, taskUser, tr)
	}
	p, err := job.Prepare(ctx, js, c.prepareOptions(g))
	if err != nil {
		return classifyJobErr(ctx.Err(), err)
	}
	defer p.Release()
	if p.Rebased+p.Dropped > 0 {
		fmt.Fprintf(os.Stderr, "the output folder held an earlier version of job %s: %d of its tasks kept (plugin, params and inputs unchanged), %d let go\n", js.Name, p.Rebased, p.Dropped)
	}
	tr.mark("prepared (output folder locked, plugin resolved, inputs hashed, earlier run read)")
	if slots == 0 && p.StartsPlugin(slots) {
		// With no local slots the plugin still starts here, confined, to
		// describe itself (unless an earlier run remembered its answer)
		// or for spot checks: its sandbox warms beside the swarm's start.
		defer sandbox.Warm()()
	}
	sw, stop, err := c.runSwarm(ctx, g, tr)
	if err != nil {
		return err
	}
	defer stop()
	var self *selfRun
	if c.replicates(sw, js) {
		f := c.earlierInSwarm(ctx, sw, p)
		attach, fetch, epoch := fromSwarm(f)
		if attach || fetch {
			return c.rejoin(ctx, sw, p, f, attach)
		}
		if f != nil {
			fmt.Fprintf(os.Stderr, "job %s (%s) ended in the swarm as %s without an output folder to fetch: running it here (epoch %d)\n", f.Record.Id[:12], js.Name, f.Record.State, epoch)
		}
		if self, err = newSelfRun(g, sw, p, epoch, c.ReplicateAfter); err != nil {
			return err
		}
		defer self.close()
	}
	var live *job.Live
	if c.UI != "" {
		live = job.NewLive()
		peers := &runPeers{self: sw.name, member: sw.member, slots: slots, live: live, members: sw.members, conf: confinement()}
		stopUI, err := startUI(ctx, g, c.UI, webui.DefaultRunAddr, webui.Config{
			Title: "job " + js.Name, Job: live, Swarm: peers, OutDir: p.OutDir, Cancel: cancel})
		if err != nil {
			return err
		}
		defer stopUI()
	}
	if js.Tasks.Len()*coordBytesPerTask > bigHeap {
		expectBigHeap()
	}
	prog := newProgress(os.Stderr, js.Name, !c.NoProgress)
	start := time.Now()
	ropts := c.runOptions(g, sw, slots, taskUser, tr)
	ropts.Events, ropts.Live = traceEvents(prog, tr), live
	if self != nil {
		self.options(&ropts)
	}
	rep, runErr := job.Run(ctx, p, ropts)
	prog.Finish()
	if self != nil {
		self.end(runErr)
		if errors.Is(runErr, job.ErrFenced) && ctx.Err() == nil {
			// A member took the job over (this process was cut off for a
			// while): follow it there.
			if f := inSwarm(ctx, sw, p.ID.String()); f != nil {
				attach, fetch, _ := fromSwarm(f)
				if attach || fetch {
					return c.rejoin(ctx, sw, p, f, attach)
				}
			}
		}
		sw.leave()
	}
	tr.mark("job run returned")
	if rep != nil {
		// The run's report holds the job's fields; its tasks are in the
		// job database, read a task at a time.
		tasks := dbTasks(ctx, p.OutDir)
		if c.JSON {
			if err := report.EncodeEach(os.Stdout, rep, tasks); err != nil {
				return withCode(exitInternal, fmt.Errorf("print report: %w", err))
			}
		}
		took := time.Since(start)
		sums, err := summaryTasks(ctx, p.OutDir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "p2pc: read the tasks: %v\n", err)
		}
		sums.retries, sums.stalled = js.Retries, errors.Is(runErr, job.ErrStalled)
		printSummary(os.Stderr, rep, sums, p.OutDir, took)
	}
	if runErr != nil {
		return classifyJobErr(ctx.Err(), runErr)
	}
	return nil
}

// runOptions are the options of job.Run that the flags and the swarm give.
func (c *RunCmd) runOptions(g *Globals, sw *submitterSwarm, slots int, taskUser *sandbox.User, tr *phaseTrace) job.RunOptions {
	return job.RunOptions{
		Slots:      slots,
		Node:       sw.name,
		TaskUser:   taskUser,
		Phase:      tr.fn(),
		Ending:     sw.leave,
		Logger:     g.Logger,
		Remote:     sw.remote,
		MinPeers:   c.MinPeers,
		Strikes:    c.Strikes,
		MaxLost:    c.MaxLost,
		StallAfter: c.StallAfter,
		WaitPeers:  c.WaitPeers,
		TrustFile:  filepath.Join(g.Data, "trust.json"),
		Version:    version,
	}
}

// coordBytesPerTask is about what the coordinator keeps in memory per
// task of a running job (its scheduling state, the journal's note of the
// task's rows, a few flags: package job's records.go).
const coordBytesPerTask = 100

// againHint ends the error of a run its own disk stopped.
const againHint = "free space, then run the same command again: the job resumes"

func classifyJobErr(ctxErr, err error) error {
	switch {
	case ctxErr != nil:
		return withCode(exitInterrupted, errors.New("interrupted; run it again to resume"))
	case errors.Is(err, job.ErrLocalDisk):
		if !strings.Contains(err.Error(), againHint) {
			err = fmt.Errorf("%w (%s)", err, againHint)
		}
		return withCode(exitLocalDisk, err)
	case errors.Is(err, job.ErrBadInput):
		return withCode(exitBadInput, err)
	case errors.Is(err, job.ErrTasksFailed), errors.Is(err, job.ErrStalled):
		return withCode(exitTaskFailed, err)
	default:
		return withCode(exitInternal, err)
	}
}

// dbTasks yields the tasks of the job in the output folder out, as its
// job database holds them.
func dbTasks(ctx context.Context, out string) func(yield func(*report.Task) error) error {
	return func(yield func(*report.Task) error) error {
		db, err := jobdb.OpenClosed(context.WithoutCancel(ctx), filepath.Join(out, jobdb.FileName))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.EachTask(context.WithoutCancel(ctx), func(_ int, t *report.Task) error { return yield(t) })
	}
}

// summaryTasks reads what the run's summary says of the tasks in the
// output folder out: the accepted results by peer, the first failed tasks.
func summaryTasks(ctx context.Context, out string) (taskSums, error) {
	ctx = context.WithoutCancel(ctx)
	db, err := jobdb.OpenClosed(ctx, filepath.Join(out, jobdb.FileName))
	if err != nil {
		return taskSums{}, err
	}
	defer db.Close()
	var s taskSums
	if s.count, err = db.Shares(ctx); err != nil {
		return s, err
	}
	if s.agreed, err = agreedShares(ctx, db); err != nil {
		return s, err
	}
	s.failed, err = db.Failed(ctx, shownFailures)
	return s, err
}

// peerShares says how many accepted results each peer produced, biggest
// share first: "host-a 40, host-b 24".
func peerShares(count map[string]int) string {
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
