package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
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
	Version string  `json:"version"`
	Jobs    int     `json:"jobs"`
	Tasks   int     `json:"tasks"`
	TotalS  float64 `json:"total_s"`
	Rate    float64 `json:"tasks_per_s"`
	Command string  `json:"command"`
	// MachineCPUS is the CPU time the whole machine used meanwhile.
	MachineCPUS float64 `json:"machine_cpu_s"`
}

// runParallel times `parallel -j jobs echo hello {}` over tasks
// arguments (Preon's job was a shell script running `echo hello`), in a
// lab's namespace and cgroup like p2pc's processes.
func (e *Env) runParallel(ctx context.Context, tasks, jobs int) (*parallelResult, error) {
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
	cmd, err := lab.Command(ctx, append([]string{bin}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("parallel: %w", err)
	}
	cmd.Stdin = &in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	m0, _ := harness.MachineCPU()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("parallel: %w: %s", err, errb.String())
	}
	took := time.Since(start)
	m1, _ := harness.MachineCPU()
	if n := strings.Count(out.String(), "hello"); n != tasks {
		return nil, fmt.Errorf("parallel: %d of %d tasks answered", n, tasks)
	}
	return &parallelResult{
		Version:     firstLine(string(ver)),
		Jobs:        jobs,
		Tasks:       tasks,
		TotalS:      took.Seconds(),
		Rate:        float64(tasks) / took.Seconds(),
		Command:     fmt.Sprintf("seq 0 %d | parallel %s", tasks-1, strings.Join(args, " ")),
		MachineCPUS: (m1 - m0).Seconds(),
	}, lab.Close()
}

// daskResult is what benchmarks/comparators/dask_tasks.py prints.
type daskResult struct {
	Version  string    `json:"dask_version"`
	Tasks    int       `json:"tasks"`
	Workers  int       `json:"workers"`
	Threads  int       `json:"threads_per_worker"`
	StartupS float64   `json:"startup_s"`
	WarmupS  float64   `json:"warmup_s"`
	Runs     []daskRun `json:"runs"`
}

// daskRun is one measured round of the Dask comparator.
type daskRun = struct {
	TotalS      float64   `json:"total_s"`
	Rate        float64   `json:"tasks_per_s"`
	LatenciesMS []float64 `json:"latencies_ms"`
}

// median is the round of median rate (the lower middle one of an even
// number), as medianRun picks p2pc's.
func (d *daskResult) median() daskRun {
	rs := slices.Clone(d.Runs)
	slices.SortFunc(rs, func(a, b daskRun) int { return cmp.Compare(a.Rate, b.Rate) })
	return rs[(len(rs)-1)/2]
}

// daskPython is Debian's interpreter, where python3-distributed lives.
const daskPython = "/usr/bin/python3"

// runDask runs the Dask comparator inside a lab's namespace (its
// LocalCluster talks over loopback there, never on the machine's
// network).
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
	cmd, err := lab.Command(ctx, daskPython, script, "--tasks", strconv.Itoa(tasks), "--workers", strconv.Itoa(workers),
		"--threads", strconv.Itoa(threads), "--runs", strconv.Itoa(runs))
	if err != nil {
		return nil, fmt.Errorf("dask: %w", err)
	}
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("dask: %w: %s", err, tail(errb.String(), 1500))
	}
	var r daskResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("dask: read its output: %w: %q", err, tail(out.String(), 300))
	}
	if len(r.Runs) == 0 {
		return nil, fmt.Errorf("dask: no runs in its output")
	}
	return &r, lab.Close()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
