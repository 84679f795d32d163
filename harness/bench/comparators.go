package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// Comparators: GNU parallel and a Dask LocalCluster (Debian's parallel
// and python3-distributed). Each is skipped, with a line saying so, when
// it is not installed: p2pc bench installs nothing.

// parallelResult is GNU parallel running the tasks on this machine.
type parallelResult struct {
	Version string `json:"version"`
	Jobs    int    `json:"jobs"`
	Tasks   int    `json:"tasks"`
	// TotalS is the median round's whole command (start to exit: for GNU
	// parallel also its makespan), Rate Tasks / TotalS; RunsS every
	// round's.
	TotalS  float64   `json:"total_s"`
	Rate    float64   `json:"tasks_per_s"`
	RunsS   []float64 `json:"runs_s"`
	Command string    `json:"command"`
	// MachineCPUS is the CPU time the whole machine used meanwhile.
	MachineCPUS float64 `json:"machine_cpu_s"`
}

// rates are the rounds' rates with an interval.
func (p *parallelResult) rates() Interval {
	var xs []float64
	for _, s := range p.RunsS {
		xs = append(xs, float64(p.Tasks)/s)
	}
	return MedianCI(xs)
}

// parallelRig times `parallel -j jobs echo hello {}` over tasks
// arguments (Preon's job was a shell script running `echo hello`), a
// round at a time, in a lab's namespace and cgroup like p2pc's processes:
// a suite interleaves its rounds with p2pc's (round), then reads the
// result.
type parallelRig struct {
	lab        *harness.Lab
	bin        string
	args       []string
	in         []byte
	tasks      int
	jobs       int
	version    string
	took       []float64
	machineCPU time.Duration
}

// newParallelRig finds GNU parallel (errSkip when it is not installed)
// and prepares its rounds in lab.
func (e *Env) newParallelRig(ctx context.Context, lab *harness.Lab, tasks, jobs int) (*parallelRig, error) {
	bin, err := exec.LookPath("parallel")
	if err != nil {
		return nil, fmt.Errorf("%w: GNU parallel is not installed (Debian package parallel)", errSkip)
	}
	ver, _ := exec.CommandContext(ctx, bin, "--version").Output()
	var in bytes.Buffer
	for i := range tasks {
		fmt.Fprintln(&in, i)
	}
	return &parallelRig{lab: lab, bin: bin, args: []string{"--will-cite", "-j", strconv.Itoa(jobs), "echo", "hello", "{}"},
		in: in.Bytes(), tasks: tasks, jobs: jobs, version: firstLine(string(ver))}, nil
}

// round runs the tasks once and records the whole command's time.
func (r *parallelRig) round(ctx context.Context) error {
	cmd, err := r.lab.Command(ctx, append([]string{r.bin}, r.args...)...)
	if err != nil {
		return fmt.Errorf("parallel: %w", err)
	}
	cmd.Stdin = bytes.NewReader(r.in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	m0, _ := harness.MachineCPU()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("parallel: %w: %s", err, errb.String())
	}
	r.took = append(r.took, time.Since(start).Seconds())
	m1, _ := harness.MachineCPU()
	r.machineCPU += m1 - m0
	if n := strings.Count(out.String(), "hello"); n != r.tasks {
		return fmt.Errorf("parallel: %d of %d tasks answered", n, r.tasks)
	}
	return nil
}

// result is the rounds run so far.
func (r *parallelRig) result() *parallelResult {
	med := MedianCI(r.took).Median
	return &parallelResult{
		Version:     r.version,
		Jobs:        r.jobs,
		Tasks:       r.tasks,
		TotalS:      med,
		Rate:        float64(r.tasks) / med,
		RunsS:       r.took,
		Command:     fmt.Sprintf("seq 0 %d | parallel %s", r.tasks-1, strings.Join(r.args, " ")),
		MachineCPUS: r.machineCPU.Seconds() / float64(max(len(r.took), 1)),
	}
}

// daskResult is the Dask comparator: a standing LocalCluster (started
// once, like p2pc's peers that stay in a swarm) and one client process per
// measured round, timed from process start to exit like `p2pc run`.
type daskResult struct {
	Version  string    `json:"dask_version"`
	Tasks    int       `json:"tasks"`
	Workers  int       `json:"workers"`
	Threads  int       `json:"threads_per_worker"`
	StartupS float64   `json:"startup_s"` // the standing cluster's start, not counted in any round
	Runs     []daskRun `json:"runs"`
}

// daskRun is one measured round: one client process.
type daskRun struct {
	// TotalS is submit to the last result (the makespan's like), Rate
	// Tasks / TotalS.
	TotalS float64 `json:"total_s"`
	Rate   float64 `json:"tasks_per_s"`
	// WallS is the client process from start to exit (the whole
	// command), WallRate Tasks / WallS.
	WallS    float64 `json:"wall_s"`
	WallRate float64 `json:"tasks_per_s_wall"`
	// SubmitUnix is when the client submitted (seconds since the epoch).
	SubmitUnix float64 `json:"submit_unix"`
	// LatenciesMS are per task, submit to its result at the client;
	// FromStartMS from the client process's start to the result.
	LatenciesMS []float64 `json:"latencies_ms"`
	FromStartMS []float64 `json:"from_start_ms"`
}

// rates are the rounds' makespan and whole-command rates with intervals.
func (d *daskResult) rates() (span, wall Interval) {
	var a, b []float64
	for _, r := range d.Runs {
		a, b = append(a, r.Rate), append(b, r.WallRate)
	}
	return MedianCI(a), MedianCI(b)
}

// daskPython is Debian's interpreter, where python3-distributed lives.
const daskPython = "/usr/bin/python3"

// daskRig is a standing Dask cluster in a lab's namespace (its
// LocalCluster talks over loopback there, never on the machine's
// network), warmed up by one client: each round is one measured client
// process, so that a suite can interleave them with p2pc's runs.
type daskRig struct {
	lab     *harness.Lab
	sctx    context.Context
	script  string
	address string
	tasks   int
	threads int
	out     *daskResult
	close   func() // ends the cluster; idempotent
}

// startDask starts the cluster of workers x threads in lab and runs the
// warm-up client (errSkip when Dask is not installed).
func (e *Env) startDask(ctx context.Context, lab *harness.Lab, tasks, workers, threads int) (*daskRig, error) {
	if _, err := os.Stat(daskPython); err != nil {
		return nil, fmt.Errorf("%w: %s not found", errSkip, daskPython)
	}
	if err := exec.CommandContext(ctx, daskPython, "-c", "import distributed").Run(); err != nil {
		return nil, fmt.Errorf("%w: Dask is not installed for %s (Debian package python3-distributed)", errSkip, daskPython)
	}
	script := e.Benchmarks("comparators/dask_tasks.py")
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	sctx, stop := context.WithTimeout(ctx, 30*time.Minute)
	serve, err := lab.Command(sctx, daskPython, script, "--serve", "--workers", strconv.Itoa(workers), "--threads", strconv.Itoa(threads))
	if err != nil {
		stop()
		return nil, fmt.Errorf("dask: %w", err)
	}
	serve.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := serve.StdinPipe()
	if err != nil {
		stop()
		return nil, fmt.Errorf("dask: %w", err)
	}
	stdout, err := serve.StdoutPipe()
	if err != nil {
		stop()
		return nil, fmt.Errorf("dask: %w", err)
	}
	var serveErr bytes.Buffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		stop()
		return nil, fmt.Errorf("dask: start the cluster: %w", err)
	}
	// The cluster ends when its stdin closes; the context's end kills its
	// process group (lab.Command) if it does not.
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { _ = serve.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				stop()
				<-done
			}
			stop()
		})
	}
	var hello struct {
		Address  string  `json:"address"`
		StartupS float64 `json:"startup_s"`
		Version  string  `json:"dask_version"`
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		closeFn()
		return nil, fmt.Errorf("dask: the cluster did not start: %w: %s", err, tail(serveErr.String(), 1500))
	}
	if err := json.Unmarshal(line, &hello); err != nil || hello.Address == "" {
		closeFn()
		return nil, fmt.Errorf("dask: read the cluster's address from %q: %v", line, err)
	}
	rig := &daskRig{lab: lab, sctx: sctx, script: script, address: hello.Address, tasks: tasks, threads: threads, close: closeFn,
		out: &daskResult{Version: hello.Version, Tasks: tasks, Workers: workers, Threads: threads, StartupS: hello.StartupS}}
	if _, err := rig.client(true); err != nil { // warm-up, not measured
		closeFn()
		return nil, fmt.Errorf("dask warm-up: %w", err)
	}
	return rig, nil
}

// round runs one measured client and records it.
func (r *daskRig) round(context.Context) error {
	run, err := r.client(false)
	if err != nil {
		return err
	}
	r.out.Runs = append(r.out.Runs, run)
	return nil
}

// client runs one client process of the rig's tasks.
func (r *daskRig) client(warm bool) (daskRun, error) {
	n := r.tasks
	args := []string{daskPython, r.script, "--scheduler", r.address, "--tasks", strconv.Itoa(n), "--threads", strconv.Itoa(r.threads), "--runs", "1"}
	if warm {
		args = append(args, "--warmup")
	}
	cmd, err := r.lab.Command(r.sctx, args...)
	if err != nil {
		return daskRun{}, err
	}
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var o, eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &eb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return daskRun{}, fmt.Errorf("client: %w: %s", err, tail(eb.String(), 1500))
	}
	wall := time.Since(start)
	var res struct {
		Runs []daskRun `json:"runs"`
	}
	if err := json.Unmarshal(o.Bytes(), &res); err != nil || len(res.Runs) != 1 {
		return daskRun{}, fmt.Errorf("client: read its output: %v: %q", err, tail(o.String(), 300))
	}
	run := res.Runs[0]
	run.WallS = wall.Seconds()
	run.WallRate = float64(n) / run.WallS
	off := run.SubmitUnix*1000 - float64(start.UnixNano())/1e6
	for _, ms := range run.LatenciesMS {
		run.FromStartMS = append(run.FromStartMS, off+ms)
	}
	return run, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
