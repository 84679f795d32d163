package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/harness"
)

func init() { Register(trackerSuite{}) }

// trackerSuite is Preon 4.2: many tiny tasks on many slots, to load the
// coordinator (Preon's tracker) as hard as possible.
type trackerSuite struct{}

func (trackerSuite) Info() Info {
	return Info{Name: "tracker", Title: "Coordinator load: 2048 echo tasks on 16 peers x 32 slots", Paper: "Preon 4.2", Order: 20}
}

type trackerConfig struct {
	Tasks        int `yaml:"tasks"`
	Peers        int `yaml:"peers"`
	Slots        int `yaml:"slots"`
	Runs         int `yaml:"runs"`
	SampleMS     int `yaml:"sample_ms"`
	ParallelJobs int `yaml:"parallel_jobs"`
	DaskWorkers  int `yaml:"dask_workers"`
	DaskThreads  int `yaml:"dask_threads"`
	// BigTasks: one more warm run of the echo job with this many tasks
	// (0: none).
	BigTasks int `yaml:"big_tasks"`
	// The coarse check: CoarseTasks tasks of CoarseMS each (echo's
	// sleep), CoarseRuns times with adaptive batching and as often with
	// `batch: off`, alternated (CoarseTasks 0: none). Tasks of a second or
	// more are never batched: both makespans must be equal within noise.
	CoarseTasks int `yaml:"coarse_tasks"`
	CoarseMS    int `yaml:"coarse_ms"`
	CoarseRuns  int `yaml:"coarse_runs"`
}

// trackerSpecs are the job specs the tracker suite runs.
type trackerSpecs struct {
	echo, big, coarse, coarseOff string
}

// coarseResult is the coarse check: the makespans of the same job of
// long tasks with adaptive batching and with `batch: off`.
type coarseResult struct {
	Tasks   int      `json:"tasks"`
	TaskMS  int      `json:"task_ms"`
	Batched Interval `json:"batched_makespan_s"`
	Off     Interval `json:"off_makespan_s"`
}

// trackerRun is one `p2pc run` of the echo job.
type trackerRun struct {
	Label     string  `json:"label"`
	Tasks     int     `json:"tasks"`
	MakespanS float64 `json:"makespan_s"` // first lease to last result
	WallS     float64 `json:"wall_s"`     // the whole p2pc run process
	Rate      float64 `json:"tasks_per_s"`
	WallRate  float64 `json:"tasks_per_s_wall"`
	CPUS      float64 `json:"coordinator_cpu_s"` // CPU time of the p2pc run process
	// MachineCPUS is the CPU time the whole machine used while p2pc run
	// ran (/proc/stat): coordinator, peers, plugin processes, the rest.
	MachineCPUS float64        `json:"machine_cpu_s"`
	FirstS      float64        `json:"first_lease_s"` // since the process started
	LastS       float64        `json:"last_result_s"`
	BusyMean    float64        `json:"busy_mean"` // CPU / wall over the makespan (1 = one core)
	BusyPeak    float64        `json:"busy_peak"` // highest 100 ms sample
	Samples     []busySample   `json:"samples"`
	Shares      map[string]int `json:"shares"`
	// Round is the interleaved round of a warm run (0: not one) and
	// After what ran just before it in the round order; Load the
	// machine's load average (1 min) at its start.
	Round int    `json:"round,omitempty"`
	After string `json:"after,omitempty"`
	Load  string `json:"loadavg_before"`
}

type busySample struct {
	T    float64 `json:"t_s"`
	Busy float64 `json:"busy"`
}

func (trackerSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	d := &trackerData{}
	specs, err := trackerSpec(ctx, env, &d.cfg)
	if err != nil {
		return nil, err
	}
	steps := 1 + d.cfg.Runs + 2
	if d.cfg.BigTasks > 0 {
		steps++
	}
	if d.cfg.CoarseTasks > 0 {
		steps++
	}
	phase := env.Progress.Phase("tracker", steps)
	defer phase.Done()
	if err = d.measure(ctx, env, specs, phase); err != nil {
		return nil, err
	}
	d.cold, d.warm = d.runs[0], medianRun(d.runs[1:])
	var span, wall []float64
	for _, r := range d.runs[1:] {
		span, wall = append(span, r.Rate), append(wall, r.WallRate)
	}
	d.span, d.wall = MedianCI(span), MedianCI(wall)
	res := &Result{}
	d.rows(res)
	sum, err := d.writeData(env)
	if err != nil {
		return nil, err
	}
	if err := d.writePlots(env); err != nil {
		return nil, err
	}
	if err := d.writeSummary(env, sum); err != nil {
		return nil, err
	}
	return res, nil
}

// trackerData is what the tracker suite measured: p2pc's runs (the cold
// one and the median warm one) and the comparators' (nil where skipped,
// with the reason in perr, derr).
type trackerData struct {
	cfg        trackerConfig
	runs       []trackerRun
	cold, warm trackerRun
	big        *trackerRun   // the BigTasks run (nil: none)
	coarse     *coarseResult // nil: none
	// span and wall are the warm runs' rates over the makespan and over
	// the whole command, with intervals.
	span, wall Interval
	par        *parallelResult
	perr       error
	dask       *daskResult
	derr       error
	// order is each round's order of the systems (rotated).
	order [][]string
}

// trackerSpec reads the configuration into cfg and writes the job specs
// (kept with the results).
func trackerSpec(ctx context.Context, env *Env, cfg *trackerConfig) (trackerSpecs, error) {
	*cfg = trackerConfig{Tasks: 2048, Peers: 16, Slots: 32, Runs: 5, SampleMS: 100, ParallelJobs: 32, DaskWorkers: 16, DaskThreads: 32,
		BigTasks: 65536, CoarseTasks: 64, CoarseMS: 1000, CoarseRuns: 3}
	var specs trackerSpecs
	if err := env.Config.Decode("tracker", env.Quick, cfg); err != nil {
		return specs, err
	}
	if cfg.Tasks < 1 || cfg.Peers < 1 || cfg.Slots < 1 || cfg.Runs < 1 || cfg.SampleMS < 10 || cfg.BigTasks < 0 ||
		cfg.CoarseTasks < 0 || (cfg.CoarseTasks > 0 && (cfg.CoarseMS < 1 || cfg.CoarseRuns < 1)) {
		return specs, fmt.Errorf("tracker: tasks, peers, slots and runs must be positive, sample_ms at least 10, big_tasks and coarse_tasks not negative, coarse_ms and coarse_runs positive with coarse_tasks: %+v", cfg)
	}
	plugin, err := env.Plugin(ctx, "echo")
	if err != nil {
		return specs, err
	}
	for _, s := range []struct {
		name, keep string
		to         *string
		job        JobSpec
		want       bool
	}{
		{"tracker", "job.yaml", &specs.echo, JobSpec{Name: "bench-tracker", Plugin: plugin, Tasks: []any{Range("i", cfg.Tasks)}, Timeout: "1m"}, true},
		{"tracker-big", "big.yaml", &specs.big, JobSpec{Name: "bench-tracker-big", Plugin: plugin, Tasks: []any{Range("i", cfg.BigTasks)}, Timeout: "1m"}, cfg.BigTasks > 0},
		{"tracker-coarse", "coarse.yaml", &specs.coarse, JobSpec{Name: "bench-tracker-coarse", Plugin: plugin,
			Params: map[string]any{"sleep_ms": cfg.CoarseMS}, Tasks: []any{Range("i", cfg.CoarseTasks)}, Timeout: "1m"}, cfg.CoarseTasks > 0},
		{"tracker-coarse-off", "coarse-off.yaml", &specs.coarseOff, JobSpec{Name: "bench-tracker-coarse", Plugin: plugin,
			Params: map[string]any{"sleep_ms": cfg.CoarseMS}, Tasks: []any{Range("i", cfg.CoarseTasks)}, Timeout: "1m", Batch: "off"}, cfg.CoarseTasks > 0},
	} {
		if !s.want {
			continue
		}
		if *s.to, err = env.WriteSpec(s.name, s.job); err != nil {
			return specs, err
		}
		if err := env.KeepSpec(*s.to, s.keep); err != nil {
			return specs, err
		}
	}
	return specs, nil
}

// measure runs the echo job on a lab of uniform peers: once cold, then
// cfg.Runs times warm; then the big run and the coarse check on the same
// (warm) lab.
func (d *trackerData) measure(ctx context.Context, env *Env, specs trackerSpecs, phase Phase) error {
	cfg := d.cfg
	lab, err := env.NewLab(ctx, uniformPeers(cfg.Peers, cfg.Slots))
	if err != nil {
		return err
	}
	defer lab.Close()
	run := func(label, spec string, args ...string) (trackerRun, error) {
		load := loadavg()
		m0, _ := harness.MachineCPU()
		sub, err := env.Submit(ctx, lab, spec, harness.SubmitOptions{SampleCPU: time.Duration(cfg.SampleMS) * time.Millisecond, Args: args})
		if err != nil {
			return trackerRun{}, fmt.Errorf("tracker %s: %w", label, err)
		}
		m1, _ := harness.MachineCPU()
		r := trackerOf(label, sub, time.Duration(cfg.SampleMS)*time.Millisecond)
		r.MachineCPUS = (m1 - m0).Seconds()
		r.Load = load
		return r, nil
	}
	r, err := run("cold (first job: plugin fetched, plugin processes started)", specs.echo,
		// The cold run waits until every peer has enrolled (fetched the
		// plugin, started its first plugin process): else it may end on
		// the first few peers, and warm run 1 would be the first run of
		// the job for all the others, cold there.
		"--min-peers", strconv.Itoa(cfg.Peers))
	if err != nil {
		return err
	}
	d.runs = append(d.runs, r)
	phase.Step(fmt.Sprintf("p2pc %s: %.0f tasks/s", r.Label, r.Rate))
	if err := d.rounds(ctx, env, lab, specs, phase, run); err != nil {
		return err
	}
	if cfg.BigTasks > 0 {
		r, err := run(fmt.Sprintf("warm, %d tasks", cfg.BigTasks), specs.big)
		if err != nil {
			return err
		}
		d.big = &r
		phase.Step(fmt.Sprintf("p2pc %s: %.0f tasks/s", r.Label, r.Rate))
	}
	if cfg.CoarseTasks > 0 {
		var batched, off []float64
		for i := range cfg.CoarseRuns {
			for _, c := range []struct {
				spec, how string
				to        *[]float64
			}{{specs.coarse, "adaptive batching", &batched}, {specs.coarseOff, "batch: off", &off}} {
				r, err := run(fmt.Sprintf("coarse %d, %s", i+1, c.how), c.spec)
				if err != nil {
					return err
				}
				*c.to = append(*c.to, r.MakespanS)
			}
		}
		d.coarse = &coarseResult{Tasks: cfg.CoarseTasks, TaskMS: cfg.CoarseMS, Batched: MedianCI(batched), Off: MedianCI(off)}
		phase.Step(fmt.Sprintf("coarse check: makespan %.3f s batched, %.3f s off", d.coarse.Batched.Median, d.coarse.Off.Median))
	}
	if err := lab.CheckLogs(); err != nil {
		return err
	}
	return lab.Close()
}

// rounds runs the warm p2pc runs interleaved with the comparators' rounds
// (GNU parallel, a standing Dask cluster; each skipped when not
// installed), in the same lab, the order rotated each round: every
// system runs after each other, as a user's run comes after whatever
// ran before it, and none always runs first on a quiet machine.
func (d *trackerData) rounds(ctx context.Context, env *Env, lab *harness.Lab, specs trackerSpecs, phase Phase,
	run func(label, spec string, args ...string) (trackerRun, error)) error {
	cfg := d.cfg
	type system struct {
		name  string
		round func(i int) error
	}
	systems := []system{{"p2pc", func(i int) error {
		r, err := run(fmt.Sprintf("warm run %d", i+1), specs.echo)
		if err != nil {
			return err
		}
		r.Round = i + 1
		d.runs = append(d.runs, r)
		phase.Step(fmt.Sprintf("p2pc %s: %.0f tasks/s", r.Label, r.Rate))
		return nil
	}}}
	par, err := env.newParallelRig(ctx, lab, cfg.Tasks, cfg.ParallelJobs)
	if err == nil {
		systems = append(systems, system{"GNU parallel", func(int) error { return par.round(ctx) }})
	} else if d.perr = err; !errors.Is(err, errSkip) {
		return err
	}
	dask, err := env.startDask(ctx, lab, cfg.Tasks, cfg.DaskWorkers, cfg.DaskThreads)
	if err == nil {
		defer dask.close()
		systems = append(systems, system{"Dask", func(int) error { return dask.round(ctx) }})
	} else if d.derr = err; !errors.Is(err, errSkip) {
		return err
	}
	last := "cold run"
	for i := range cfg.Runs {
		var order []string
		for k := range systems {
			sys := systems[(i+k)%len(systems)]
			order = append(order, sys.name)
			n := len(d.runs)
			if err := sys.round(i); err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, sys.name, err)
			}
			if len(d.runs) > n {
				d.runs[n].After = last
			}
			last = sys.name
		}
		d.order = append(d.order, order)
	}
	if par != nil {
		d.par = par.result()
	}
	phase.Step(comparatorStep("GNU parallel", d.perr))
	if dask != nil {
		dask.close()
		d.dask = dask.out
	}
	phase.Step(comparatorStep("Dask", d.derr))
	return nil
}

// rows adds the headline rows: the cold run, the warm runs' rates over
// the makespan and over the whole command, the comparators' alike.
func (d *trackerData) rows(res *Result) {
	preonRate := "≈100 tasks/s (2048 jobs in ≈20 s after discovery)"
	rate := func(iv Interval) string { return iv.Format(func(x float64) string { return fmt.Sprintf("%.0f", x) }) }
	res.Add("p2pc, cold", "makespan (s) / tasks/s over it; whole command (s)", fmt.Sprintf("%.2f / %.0f; %.2f", d.cold.MakespanS, d.cold.Rate, d.cold.WallS), "")
	res.Add("p2pc, warm", "tasks/s over the makespan (first lease to last result), median [95% CI]", rate(d.span), preonRate)
	res.Add("p2pc, warm", "tasks/s over the whole command (p2pc run start to exit), median [95% CI]", rate(d.wall), "36 s until the last job started")
	res.Add("p2pc, warm", "spread of the rounds: slowest / fastest whole command (the suite wants at most 2)", d.spread(), "")
	res.Add("p2pc, warm", "coordinator busy, mean / peak (1 = one core)", fmt.Sprintf("%.2f / %.2f", d.warm.BusyMean, d.warm.BusyPeak), "< 0.5 (single-threaded tracker)")
	res.Add("p2pc, warm", "machine CPU per task (us; coordinator, peers, plugin processes), median run", fmt.Sprintf("%.0f", 1e6*d.warm.MachineCPUS/float64(max(d.warm.Tasks, 1))), "")
	if b := d.big; b != nil {
		res.Add(fmt.Sprintf("p2pc, warm, %d tasks", b.Tasks), "tasks/s over the makespan / over the whole command; machine CPU per task (us)",
			fmt.Sprintf("%.0f / %.0f; %.0f", b.Rate, b.WallRate, 1e6*b.MachineCPUS/float64(max(b.Tasks, 1))), "")
	}
	if c := d.coarse; c != nil {
		sec := func(x float64) string { return fmt.Sprintf("%.3f", x) }
		res.Add(fmt.Sprintf("p2pc, %d tasks of %d ms", c.Tasks, c.TaskMS), "makespan (s), median [95% CI]: adaptive batching / batch: off (tasks of 1 s or more are never batched: equal within noise)",
			c.Batched.Format(sec)+" / "+c.Off.Format(sec), "")
	}
	if d.par != nil {
		res.Add("GNU parallel", fmt.Sprintf("tasks/s over the whole command (-j %d; = its makespan), median [95%% CI]", d.par.Jobs), rate(d.par.rates()), "")
	} else {
		res.Add("GNU parallel", "tasks/s", skipped(d.perr), "")
	}
	if d.dask != nil {
		span, wall := d.dask.rates()
		who := fmt.Sprintf("Dask, standing LocalCluster %d x %d", d.dask.Workers, d.dask.Threads)
		res.Add(who, "tasks/s over the makespan (submit to last result), median [95% CI]", rate(span), "")
		res.Add(who, "tasks/s over the whole command (client process start to exit; cluster start-up not counted), median [95% CI]", rate(wall), "")
		if span.Median > 0 && wall.Median > 0 {
			res.Add("p2pc, warm / Dask", "ratio of median tasks/s: makespan / whole command", fmt.Sprintf("%.2fx / %.2fx", d.span.Median/span.Median, d.wall.Median/wall.Median), "")
		}
	} else {
		res.Add("Dask", "tasks/s", skipped(d.derr), "")
	}
	if d.par != nil && d.par.Rate > 0 {
		res.Add("p2pc, warm / GNU parallel", "ratio of median tasks/s, whole command", fmt.Sprintf("%.2fx", d.wall.Median/d.par.rates().Median), "")
	}
	res.Note("%d tasks on %d peers x %d slots (Preon: 2048 echo jobs, 16 peers x 32 threads, a master of 256 threads, on DAS-5 nodes); here all %d peers and the coordinator share the 2 cores; warm figures: medians of %d runs [95%% bootstrap CI]; the makespan is first lease (Dask: submit) to last result, the whole command a process's start to its exit", d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, d.cfg.Peers, d.cfg.Runs)
}

// spread is the slowest warm run's whole command over the fastest's,
// with both and the load averages they started at.
func (d *trackerData) spread() string {
	var warm []trackerRun
	for _, r := range d.runs {
		if r.Round > 0 {
			warm = append(warm, r)
		}
	}
	if len(warm) == 0 {
		return "no warm run"
	}
	lo := slices.MinFunc(warm, func(a, b trackerRun) int { return cmp.Compare(a.WallS, b.WallS) })
	hi := slices.MaxFunc(warm, func(a, b trackerRun) int { return cmp.Compare(a.WallS, b.WallS) })
	return fmt.Sprintf("%.2fx (%.3f s in round %d after %s, load %s; %.3f s in round %d after %s, load %s)",
		hi.WallS/lo.WallS, hi.WallS, hi.Round, hi.After, hi.Load, lo.WallS, lo.Round, lo.After, lo.Load)
}

// writeData writes tracker.json, busy.csv and tracker.csv, and returns
// the summary table (one line per run).
func (d *trackerData) writeData(env *Env) ([][]string, error) {
	if err := env.WriteJSON("tracker.json", map[string]any{
		"machine": env.Machine, "config": d.cfg, "quick": env.Quick, "runs": d.runs, "big": d.big, "coarse": d.coarse,
		"round_order": d.order, "gnu_parallel": d.par, "gnu_parallel_skipped": errString(d.perr), "dask": d.dask, "dask_skipped": errString(d.derr),
		"definitions": map[string]string{
			"makespan_s":   "first lease issued to last result, from report.json",
			"wall_s":       "the p2pc run process, start to exit",
			"busy":         "CPU time (utime+stime, /proc/<pid>/stat) of the p2pc run process over wall time, per sample interval; 1 = one core busy",
			"busy_mean":    "over the makespan",
			"t_s":          "seconds since the p2pc run process started",
			"gnu_parallel": "seq | parallel -j N echo hello {} on this machine",
		},
	}); err != nil {
		return nil, err
	}
	var csvRows [][]string
	for _, r := range d.runs {
		for _, s := range r.Samples {
			csvRows = append(csvRows, []string{r.Label, f3(s.T), f3(s.Busy)})
		}
	}
	if err := env.WriteCSV("busy.csv", []string{"run", "t_s", "busy"}, csvRows); err != nil {
		return nil, err
	}
	var sum [][]string
	all := d.runs
	if d.big != nil {
		all = append(slices.Clone(all), *d.big)
	}
	for _, r := range all {
		n := float64(max(r.Tasks, 1))
		sum = append(sum, []string{r.Label, fmt.Sprint(r.Tasks), f3(r.MakespanS), f1(r.Rate), f3(r.WallS), f1(r.WallRate), f3(r.CPUS),
			f3(1000 * r.CPUS / n), f3(1000 * r.MachineCPUS / n), f2(r.BusyMean), f2(r.BusyPeak)})
	}
	if d.par != nil {
		sum = append(sum, []string{"GNU parallel", fmt.Sprint(d.par.Tasks), f3(d.par.TotalS), f1(d.par.Rate), f3(d.par.TotalS), f1(d.par.Rate), "", "",
			f3(1000 * d.par.MachineCPUS / float64(max(d.par.Tasks, 1))), "", ""})
	}
	if d.dask != nil {
		for i, r := range d.dask.Runs {
			sum = append(sum, []string{fmt.Sprintf("Dask client %d (standing cluster)", i+1), fmt.Sprint(d.dask.Tasks), f3(r.TotalS), f1(r.Rate), f3(r.WallS), f1(r.WallRate), "", "", "", "", ""})
		}
	}
	header := []string{"run", "tasks", "time_s", "tasks_per_s", "wall_s", "tasks_per_s_wall", "coordinator_cpu_s", "coordinator_cpu_ms_per_task", "machine_cpu_ms_per_task", "busy_mean", "busy_peak"}
	if err := env.WriteCSV("tracker.csv", header, sum); err != nil {
		return nil, err
	}

	return sum, nil
}

// writePlots writes busy.svg and throughput.svg.
func (d *trackerData) writePlots(env *Env) error {
	var series []Series
	gap := 3 * float64(d.cfg.SampleMS) / 1000
	for i, r := range []trackerRun{d.cold, d.warm} {
		var xs, ys []float64
		for j, s := range r.Samples {
			// A sample late by more than 3 intervals (the machine was
			// saturated) breaks the lines: its value is the mean over
			// the gap.
			if j > 0 && s.T-r.Samples[j-1].T > gap {
				xs, ys = append(xs, math.NaN()), append(ys, math.NaN())
			}
			xs, ys = append(xs, s.T), append(ys, 100*s.Busy)
		}
		series = append(series,
			Series{Name: r.Label + ", 100 ms samples", X: xs, Y: ys, Kind: Points, Color: Palette[i], Radius: 2},
			Series{Name: r.Label + ", rolling mean of 5", X: xs, Y: Rolling(ys, 5), Kind: Line, Color: Palette[i]})
	}
	if err := env.WriteSVG("busy.svg", (&Plot{
		Title:  "Coordinator usage over time (cf. Preon Figure 3)",
		XLabel: "seconds since p2pc run started", YLabel: "CPU of the p2pc run process (% of one core)",
		Series: series,
		HLines: []HLine{{Y: 50, Label: "Preon: tracker busy < 50%", Color: "#555", Dashed: true}},
		XZero:  true,
		YZero:  true,
		Note:   fmt.Sprintf("%d echo tasks, %d peers x %d slots; %s", d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, quickNote(env)),
	}).SVG()); err != nil {
		return err
	}
	// Two bars per system: over the makespan and over the whole command,
	// medians with their 95% intervals.
	cats := []string{"p2pc warm"}
	spanV, spanLo, spanHi := []float64{d.span.Median}, []float64{d.span.Lo}, []float64{d.span.Hi}
	wallV, wallLo, wallHi := []float64{d.wall.Median}, []float64{d.wall.Lo}, []float64{d.wall.Hi}
	if d.par != nil {
		iv := d.par.rates()
		cats = append(cats, "GNU parallel")
		spanV, spanLo, spanHi = append(spanV, math.NaN()), append(spanLo, math.NaN()), append(spanHi, math.NaN())
		wallV, wallLo, wallHi = append(wallV, iv.Median), append(wallLo, iv.Lo), append(wallHi, iv.Hi)
	}
	if d.dask != nil {
		sp, wa := d.dask.rates()
		cats = append(cats, "Dask (standing cluster)")
		spanV, spanLo, spanHi = append(spanV, sp.Median), append(spanLo, sp.Lo), append(spanHi, sp.Hi)
		wallV, wallLo, wallHi = append(wallV, wa.Median), append(wallLo, wa.Lo), append(wallHi, wa.Hi)
	}
	preon := nan(len(cats))
	preon[0] = 2048 / 20.0
	if err := env.WriteSVG("throughput.svg", (&Bars{
		Title: "Tiny-task throughput", YLabel: "tasks per second",
		Categories: cats,
		Groups: []BarGroup{
			{Name: "over the makespan (first lease / submit to last result)", Values: spanV, Lo: spanLo, Hi: spanHi},
			{Name: "over the whole command (process start to exit)", Values: wallV, Lo: wallLo, Hi: wallHi},
		},
		Marks:  []BarGroup{{Name: "Preon: 2048 jobs in ≈20 s", Values: preon, Color: "#D55E00"}},
		Format: func(v float64) string { return fmt.Sprintf("%.0f", v) },
		Note:   fmt.Sprintf("%d tasks; medians of %d runs, bars: 95%% CI; %s", d.cfg.Tasks, d.cfg.Runs, quickNote(env)),
	}).SVG()); err != nil {
		return err
	}

	return nil
}

// writeSummary writes summary.md around the summary table sum.
func (d *trackerData) writeSummary(env *Env, sum [][]string) error {
	var md Markdown
	md.P("# Coordinator load (Preon 4.2)")
	md.P("%s", quickBanner(env))
	md.P("**Workload.** %d echo tasks (`plugins/echo`, which returns its parameters; [job.yaml](job.yaml)) on %d peers x %d slots, as in Preon's tracker experiment (2048 jobs of `echo hello`, 16 peers x 32 threads). "+
		"Here every peer, its plugin processes and the coordinator share this machine's %d cores, so the experiment measures the whole system's cost per task, not the network. "+
		"The first job is cold (each peer fetches the plugin and starts its plugin processes); the warm runs reuse them, like peers that stay in a swarm.",
		d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, env.Machine.Cores)
	md.P("**Usage.** Preon measured its single-threaded tracker's working time between requests. p2pc's coordinator is the `p2pc run` process (coordinator, block server, gossip, report journal, all goroutines): its CPU time is sampled every %d ms from /proc/<pid>/stat (utime + stime, 10 ms resolution) and divided by the wall time: 1.0 = one core busy.", d.cfg.SampleMS)
	md.Table([]string{"run", "tasks", "time (s)", "tasks/s", "wall (s)", "tasks/s (wall)", "coordinator CPU (s)", "coordinator CPU per task (ms)", "machine CPU per task (ms)", "busy mean", "busy peak"}, sum)
	md.P("**Which time is which.** *time* is the makespan: for p2pc first lease to last result (report.json), for Dask the client's submit to its last result, for GNU parallel (`%s`) the whole command. *wall* is the whole command, a process's start to its exit: `p2pc run` (start, plugin check, enrolment, dispatch, collection, report) for p2pc, the client process (`benchmarks/comparators/dask_tasks.py --scheduler`: interpreter and import, connect, submit, gather, exit) of a standing Dask LocalCluster of %d workers x %d threads for Dask — the like of p2pc's peers that stay in a swarm; the cluster's own start-up, %s, is not counted, as the peers' is not. Headline figures: medians over the %d warm runs (Dask: %d clients) with 95%% bootstrap intervals. %s %s",
		parCmd(d.par), d.cfg.DaskWorkers, d.cfg.DaskThreads, daskStartup(d.dask), d.cfg.Runs, d.cfg.Runs, skipLine("GNU parallel", d.perr), skipLine("Dask", d.derr))
	md.P("| system | tasks/s over the makespan | tasks/s over the whole command |\n| --- | --- | --- |\n%s", d.likeTable())
	md.P("Machine CPU per task is all the CPU this machine used while `p2pc run` ran (/proc/stat: coordinator, peers, plugin processes, and whatever else ran), over the tasks. The coordinator is not what limits the rate here: it is busy a fraction of one core while the peers and their plugin processes, which share the same %d cores, spend several times its CPU per task (a peer stages, digests and removes every task's output on disk; a cold peer also starts its plugin processes, up to %d, as many as its calls wait for). On a LAN each peer brings its own cores and the coordinator's CPU per task bounds the rate instead.", env.Machine.Cores, d.cfg.Slots)
	if b := d.big; b != nil {
		md.P("**%d tasks.** One more warm run of the same job with %d tasks (last line of the table; [big.yaml](big.yaml)): batches stay large for longer, so it shows the cost per task when the per-batch costs are spread thin.", b.Tasks, b.Tasks)
	}
	if c := d.coarse; c != nil {
		md.P("**Coarse check.** %d echo tasks that sleep %d ms each on the same swarm, %d times with adaptive batching ([coarse.yaml](coarse.yaml)) and as often with `batch: off` ([coarse-off.yaml](coarse-off.yaml)), alternated. Tasks of a second or more are never batched, and the probe at a job's start holds leases back for at most 5 ms, so both makespans must be equal within noise: median %.3f s [%.3f, %.3f] batched, %.3f s [%.3f, %.3f] off.",
			c.Tasks, c.TaskMS, d.cfg.CoarseRuns, c.Batched.Median, c.Batched.Lo, c.Batched.Hi, c.Off.Median, c.Off.Lo, c.Off.Hi)
	}
	md.P("**Preon.** The first jobs were seen after 15 s (the master's filesystem watcher); the 2048 jobs then started within ≈20 s (the last 36 s after the start), ≈100 jobs/s, and the tracker worked less than 50%% of the time.")
	md.P("![coordinator usage](busy.svg)\n\n![throughput](throughput.svg)")
	md.P("Where samples are more than 3 intervals apart the lines break: the driver could not read /proc in time (plugin processes starting, up to %d in all, saturate the machine); the sample after a gap holds the mean over it.", d.cfg.Peers*d.cfg.Slots)
	md.P("Files: tracker.json (all runs with their samples, the coarse check's makespans), tracker.csv (one line per run), busy.csv (the samples), busy.svg, throughput.svg, job.yaml (and big.yaml, coarse.yaml, coarse-off.yaml where those ran).")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return err
	}
	return nil
}

func trackerOf(label string, sub *harness.Submission, interval time.Duration) trackerRun {
	span := SpanOf(sub.Report)
	r := trackerRun{
		Label: label, Tasks: span.Tasks, MakespanS: span.Makespan().Seconds(), WallS: sub.Wall.Seconds(),
		Rate: span.Rate(), Shares: Shares(sub.Report),
		FirstS: span.First.Sub(sub.Started).Seconds(), LastS: span.Last.Sub(sub.Started).Seconds(),
	}
	if r.WallS > 0 {
		r.WallRate = float64(r.Tasks) / r.WallS
	}
	if n := len(sub.CPU); n > 0 {
		r.CPUS = sub.CPU[n-1].CPU.Seconds()
	}
	at, busy := harness.Busy(sub.CPU, interval/2)
	var in []float64
	for i := range at {
		t := at[i].Seconds()
		r.Samples = append(r.Samples, busySample{T: t, Busy: busy[i]})
		r.BusyPeak = math.Max(r.BusyPeak, busy[i])
		if t >= r.FirstS && t <= r.LastS+0.1 {
			in = append(in, busy[i])
		}
	}
	r.BusyMean = Summarise(in).Mean
	return r
}

// uniformPeers are n peers of as many slots each, named peer01, peer02...
func uniformPeers(n, slots int) []harness.PeerSpec {
	peers := make([]harness.PeerSpec, n)
	for i := range peers {
		peers[i] = harness.PeerSpec{Name: fmt.Sprintf("peer%02d", i+1), Slots: slots}
	}
	return peers
}

// medianRun is the run of median rate (the lower middle one of an even
// number): the warm run the rows and the chart show.
func medianRun(rs []trackerRun) trackerRun {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b trackerRun) int { return cmp.Compare(a.Rate, b.Rate) })
	return sorted[(len(sorted)-1)/2]
}

func comparatorStep(name string, err error) string {
	if err != nil {
		return name + ": " + firstLine(err.Error())
	}
	return name + " done"
}

func skipped(err error) string {
	if err == nil {
		return "–"
	}
	return "skipped: " + firstLine(err.Error())
}

func skipLine(name string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("**%s was skipped:** %s.", name, firstLine(err.Error()))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func parCmd(p *parallelResult) string {
	if p == nil {
		return "parallel -j N echo hello {}"
	}
	return p.Command
}

func daskStartup(d *daskResult) string {
	if d == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f s", d.StartupS)
}

// likeTable is the like-for-like rows of the summary: every system's
// rate over the makespan and over the whole command.
func (d *trackerData) likeTable() string {
	rate := func(iv Interval) string { return iv.Format(func(x float64) string { return fmt.Sprintf("%.0f", x) }) }
	out := fmt.Sprintf("| p2pc, warm | %s | %s |\n", rate(d.span), rate(d.wall))
	if d.par != nil {
		out += fmt.Sprintf("| GNU parallel | (= whole command) | %s |\n", rate(d.par.rates()))
	}
	if d.dask != nil {
		sp, wa := d.dask.rates()
		out += fmt.Sprintf("| Dask, standing cluster | %s | %s |\n", rate(sp), rate(wa))
	}
	return out
}
