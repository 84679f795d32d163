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

// runParallel times `parallel -j jobs echo hello {}` over tasks
// arguments (Preon's job was a shell script running `echo hello`), in a
// lab's namespace and cgroup like p2pc's processes, runs times.
func (e *Env) runParallel(ctx context.Context, tasks, jobs, runs int) (*parallelResult, error) {
	bin, err := exec.LookPath("parallel")
	if err != nil {
		return nil, fmt.Errorf("%w: GNU parallel is not installed (Debian package parallel)", errSkip)
	}
	ver, _ := exec.CommandContext(ctx, bin, "--version").Output()
	args := []string{"--will-cite", "-j", strconv.Itoa(jobs), "echo", "hello", "{}"}
	var in bytes.Buffer
	for i := range tasks {
		fmt.Fprintln(&in, i)
	}
	lab, err := e.NewLab(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("parallel: %w", err)
	}
	defer lab.Close()
	m0, _ := harness.MachineCPU()
	var took []float64
	for range max(runs, 1) {
		cmd, err := lab.Command(ctx, append([]string{bin}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("parallel: %w", err)
		}
		cmd.Stdin = bytes.NewReader(in.Bytes())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("parallel: %w: %s", err, errb.String())
		}
		took = append(took, time.Since(start).Seconds())
		if n := strings.Count(out.String(), "hello"); n != tasks {
			return nil, fmt.Errorf("parallel: %d of %d tasks answered", n, tasks)
		}
	}
	m1, _ := harness.MachineCPU()
	med := MedianCI(took).Median
	return &parallelResult{
		Version:     firstLine(string(ver)),
		Jobs:        jobs,
		Tasks:       tasks,
		TotalS:      med,
		Rate:        float64(tasks) / med,
		RunsS:       took,
		Command:     fmt.Sprintf("seq 0 %d | parallel %s", tasks-1, strings.Join(args, " ")),
		MachineCPUS: (m1 - m0).Seconds() / float64(len(took)),
	}, lab.Close()
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

// runDask runs the Dask comparator inside a lab's namespace (its
// LocalCluster talks over loopback there, never on the machine's
// network): a standing cluster of workers x threads, a warm-up client,
// then runs client processes of tasks tasks each.
func (e *Env) runDask(ctx context.Context, tasks, workers, threads, runs int) (*daskResult, error) {
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
	lab, err := e.NewLab(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	defer lab.Close()
	sctx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	serve, err := lab.Command(sctx, daskPython, script, "--serve", "--workers", strconv.Itoa(workers), "--threads", strconv.Itoa(threads))
	if err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	serve.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := serve.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	stdout, err := serve.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	var serveErr bytes.Buffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		return nil, fmt.Errorf("dask: start the cluster: %w", err)
	}
	// The cluster ends when its stdin closes; the context's end kills its
	// process group (lab.Command) if it does not.
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = serve.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			stop()
			<-done
		}
	}()
	var hello struct {
		Address  string  `json:"address"`
		StartupS float64 `json:"startup_s"`
		Version  string  `json:"dask_version"`
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("dask: the cluster did not start: %w: %s", err, tail(serveErr.String(), 1500))
	}
	if err := json.Unmarshal(line, &hello); err != nil || hello.Address == "" {
		return nil, fmt.Errorf("dask: read the cluster's address from %q: %v", line, err)
	}
	out := &daskResult{Version: hello.Version, Tasks: tasks, Workers: workers, Threads: threads, StartupS: hello.StartupS}
	client := func(n int, warm bool) (daskRun, error) {
		args := []string{daskPython, script, "--scheduler", hello.Address, "--tasks", strconv.Itoa(n), "--threads", strconv.Itoa(threads), "--runs", "1"}
		if warm {
			args = append(args, "--warmup")
		}
		cmd, err := lab.Command(sctx, args...)
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
		var r struct {
			Runs []daskRun `json:"runs"`
		}
		if err := json.Unmarshal(o.Bytes(), &r); err != nil || len(r.Runs) != 1 {
			return daskRun{}, fmt.Errorf("client: read its output: %v: %q", err, tail(o.String(), 300))
		}
		run := r.Runs[0]
		run.WallS = wall.Seconds()
		run.WallRate = float64(n) / run.WallS
		off := run.SubmitUnix*1000 - float64(start.UnixNano())/1e6
		for _, ms := range run.LatenciesMS {
			run.FromStartMS = append(run.FromStartMS, off+ms)
		}
		return run, nil
	}
	if _, err := client(tasks, true); err != nil { // warm-up, not measured
		return nil, fmt.Errorf("dask warm-up: %w", err)
	}
	for i := range runs {
		r, err := client(tasks, false)
		if err != nil {
			return nil, fmt.Errorf("dask round %d: %w", i+1, err)
		}
		out.Runs = append(out.Runs, r)
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
