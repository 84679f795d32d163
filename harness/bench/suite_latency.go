package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

func init() { Register(latencySuite{}) }

// Preon 4.3's figures: dispatch to the end of execution on the peer, and
// first dispatch to the last job's end.
const (
	preonLatencyMeanMS = 10.07
	preonLatencySDMS   = 2.93
	preonLastS         = 1.96
)

// latencySuite is Preon 4.3: how long a task takes from dispatch to
// result when the work itself is nothing.
type latencySuite struct{}

func (latencySuite) Info() Info {
	return Info{Name: "latency", Title: "Dispatch latency: 200 echo tasks on 10 peers x 20 slots", Paper: "Preon 4.3", Order: 30}
}

type latencyConfig struct {
	Tasks       int `yaml:"tasks"`
	Peers       int `yaml:"peers"`
	Slots       int `yaml:"slots"`
	Runs        int `yaml:"runs"`
	SerialTasks int `yaml:"serial_tasks"`
	DaskWorkers int `yaml:"dask_workers"`
	DaskThreads int `yaml:"dask_threads"`
}

type latencyRun struct {
	Run       int       `json:"run"`
	MakespanS float64   `json:"makespan_s"` // first dispatch to the last task's end
	Latency   []Latency `json:"tasks"`
	Stats     Stats     `json:"latency_ms"`
	// FromStartMS is per task (in Latency's order) the time from the
	// submission -- the start of the p2pc run process -- to the task's
	// end on its peer: what a user who submits waits, like Dask's submit
	// to result. FromStart are their statistics.
	FromStartMS []float64 `json:"from_start_ms"`
	FromStart   Stats     `json:"from_start_stats_ms"`
	// FromFirst: per task, the job's first dispatch to its end (what
	// the p99 bound is on).
	FromFirst Stats `json:"from_first_dispatch_stats_ms"`
	// After is what ran just before (rounds interleave p2pc and Dask,
	// the order rotated); Load the load average at the run's start.
	After string `json:"after,omitempty"`
	Load  string `json:"loadavg_before"`
}

func (latencySuite) Run(ctx context.Context, env *Env) (*Result, error) {
	d := &latencyData{}
	plugin, spec, warm, err := latencySpecs(ctx, env, &d.cfg)
	if err != nil {
		return nil, err
	}
	phase := env.Progress.Phase("latency", d.cfg.Runs+3)
	defer phase.Done()
	if err = d.measure(ctx, env, spec, warm, phase); err != nil {
		return nil, err
	}
	if err := d.compare(ctx, env, plugin, phase); err != nil {
		return nil, err
	}
	d.summarise()
	res := &Result{}
	d.rows(res, env)
	if err := d.writeData(env); err != nil {
		return nil, err
	}
	if err := d.writePlot(env); err != nil {
		return nil, err
	}
	if err := d.writeSummary(env); err != nil {
		return nil, err
	}
	return res, nil
}

// latencyData is what the latency suite measured and its statistics.
type latencyData struct {
	cfg    latencyConfig
	runs   []latencyRun
	all    []float64   // every task's latency of every run (ms)
	serial *latencyRun // one peer, one slot, one task at a time; nil if not measured
	// serialBatched is the same job batched as by default: a task's lease
	// to end holds its wait behind the earlier tasks of its batch.
	serialBatched *latencyRun
	dask          *daskResult // nil where skipped (derr says why)
	derr          error
	setup         string // the lab, as a row label
	st            Stats  // of all
	sp            Stats  // of the runs' makespans
	daskSt        Stats  // of Dask's latencies
	// Like for like, per run: the mean lease-to-end and submission-to-
	// result latencies (ms) of p2pc's runs and Dask's rounds, medians
	// over the runs with 95% intervals.
	leaseCI, startCI, daskCI, daskStartCI Interval
	startSt, daskStartSt                  Stats // of every task's submission-to-result
}

// latencySpecs reads the configuration into cfg and writes the job spec
// (kept with the results) and the warm-up spec.
func latencySpecs(ctx context.Context, env *Env, cfg *latencyConfig) (plugin, spec, warm string, err error) {
	*cfg = latencyConfig{Tasks: 200, Peers: 10, Slots: 20, Runs: 10, SerialTasks: 200, DaskWorkers: 10, DaskThreads: 20}
	if err := env.Config.Decode("latency", env.Quick, cfg); err != nil {
		return "", "", "", err
	}
	if cfg.Tasks < 1 || cfg.Peers < 1 || cfg.Slots < 1 || cfg.Runs < 1 {
		return "", "", "", fmt.Errorf("latency: tasks, peers, slots and runs must be positive: %+v", cfg)
	}
	plugin, err = env.Plugin(ctx, "echo")
	if err != nil {
		return "", "", "", err
	}
	spec, err = env.WriteSpec("latency", JobSpec{Name: "bench-latency", Plugin: plugin, Tasks: []any{Range("i", cfg.Tasks)}, Timeout: "1m"})
	if err != nil {
		return "", "", "", err
	}
	// The warm-up holds every slot at once for a moment, so every peer
	// starts all its plugin processes before the measurement.
	warm, err = env.WriteSpec("latency-warmup", JobSpec{Name: "bench-latency-warmup", Plugin: plugin,
		Params: map[string]any{"sleep_ms": 300}, Tasks: []any{Range("i", cfg.Peers*cfg.Slots)}, Timeout: "1m"})
	if err != nil {
		return "", "", "", err
	}
	if err := env.KeepSpec(spec, "job.yaml"); err != nil {
		return "", "", "", err
	}
	return plugin, spec, warm, nil
}

// measure runs the warm-up jobs, then the job cfg.Runs times on a lab of
// uniform peers, each run a round with a client of a standing Dask
// cluster in the same lab (skipped when Dask is not installed), the
// order rotated: each system runs after the other as often.
func (d *latencyData) measure(ctx context.Context, env *Env, spec, warm string, phase Phase) error {
	cfg := d.cfg
	lab, err := env.NewLab(ctx, uniformPeers(cfg.Peers, cfg.Slots))
	if err != nil {
		return err
	}
	defer lab.Close()
	for range 2 {
		if _, err := env.Submit(ctx, lab, warm, harness.SubmitOptions{}); err != nil {
			return fmt.Errorf("latency warm-up: %w", err)
		}
	}
	// Peers keep a job's plugin processes for a rerun of that job only
	// (the job linger): one unmeasured run of the measured job, so that
	// the first measured run finds them warm as the later ones do.
	if _, err := env.Submit(ctx, lab, spec, harness.SubmitOptions{}); err != nil {
		return fmt.Errorf("latency warm-up: %w", err)
	}
	phase.Step("warm-up done")
	dask, err := env.startDask(ctx, lab, cfg.Tasks, cfg.DaskWorkers, cfg.DaskThreads)
	if err == nil {
		defer dask.close()
	} else if d.derr = err; !errors.Is(err, errSkip) {
		return err
	}
	last := "the warm-up"
	p2pcRun := func(i int) error {
		load := loadavg()
		sub, err := env.Submit(ctx, lab, spec, harness.SubmitOptions{})
		if err != nil {
			return fmt.Errorf("latency run %d: %w", i+1, err)
		}
		r := latencyRun{Run: i + 1, MakespanS: SpanOf(sub.Report).Makespan().Seconds(), Latency: Latencies(sub.Report), After: last, Load: load}
		ms := latMS(r.Latency)
		r.Stats = Summarise(ms)
		r.FromStartMS = fromStartMS(sub.Report, r.Latency, sub.Started)
		r.FromStart = Summarise(r.FromStartMS)
		r.FromFirst = Summarise(fromFirstMS(r.Latency))
		d.all = append(d.all, ms...)
		d.runs = append(d.runs, r)
		phase.Step(fmt.Sprintf("run %d: mean %.2f ms, p99 %.2f ms", i+1, r.Stats.Mean, r.Stats.P99))
		return nil
	}
	for i := range cfg.Runs {
		both := []string{"p2pc", "Dask"}
		if i%2 == 1 {
			both[0], both[1] = both[1], both[0]
		}
		for _, who := range both {
			switch {
			case who == "p2pc":
				err = p2pcRun(i)
			case dask != nil:
				err = dask.round(ctx)
			default:
				continue
			}
			if err != nil {
				return fmt.Errorf("latency round %d, %s: %w", i+1, who, err)
			}
			last = who
		}
	}
	if dask != nil {
		dask.close()
		d.dask = dask.out
	}
	if err := lab.CheckLogs(); err != nil {
		return err
	}
	return lab.Close()
}

// fromFirstMS is per task the time from the job's first dispatch to the
// task's end (ms).
func fromFirstMS(ls []Latency) []float64 {
	out := make([]float64, len(ls))
	for i, l := range ls {
		out[i] = msOf(l.Dispatch + l.Latency)
	}
	return out
}

// worstRound is the run with the highest p99 of first dispatch to end.
func (d *latencyData) worstRound() (latencyRun, bool) {
	if len(d.runs) == 0 {
		return latencyRun{}, false
	}
	return slices.MaxFunc(d.runs, func(a, b latencyRun) int { return cmp.Compare(a.FromFirst.P99, b.FromFirst.P99) }), true
}

// compare measures one peer with one slot, unloaded, and Dask.
func (d *latencyData) compare(ctx context.Context, env *Env, plugin string, phase Phase) error {
	// Unloaded: one peer, one slot, the tasks one after another.
	if d.cfg.SerialTasks > 0 {
		var err error
		if d.serial, d.serialBatched, err = env.serialLatency(ctx, plugin, d.cfg.SerialTasks); err != nil {
			return err
		}
	}
	phase.Step("1 peer x 1 slot done")
	phase.Step(comparatorStep("Dask", d.derr))
	return nil
}

// summarise computes the statistics.
func (d *latencyData) summarise() {
	d.setup = fmt.Sprintf("p2pc, %d peers x %d slots", d.cfg.Peers, d.cfg.Slots)
	d.st = Summarise(d.all)
	var spans []float64
	for _, r := range d.runs {
		spans = append(spans, r.MakespanS)
	}
	d.sp = Summarise(spans)
	var lease, start, startAll []float64
	for _, r := range d.runs {
		lease, start = append(lease, r.Stats.Mean), append(start, r.FromStart.Mean)
		startAll = append(startAll, r.FromStartMS...)
	}
	d.leaseCI, d.startCI, d.startSt = MedianCI(lease), MedianCI(start), Summarise(startAll)
	var daskAll, daskStartAll, dm, dsm []float64
	if d.dask != nil {
		for _, r := range d.dask.Runs {
			daskAll = append(daskAll, r.LatenciesMS...)
			daskStartAll = append(daskStartAll, r.FromStartMS...)
			dm, dsm = append(dm, Summarise(r.LatenciesMS).Mean), append(dsm, Summarise(r.FromStartMS).Mean)
		}
		d.daskSt, d.daskStartSt = Summarise(daskAll), Summarise(daskStartAll)
		d.daskCI, d.daskStartCI = MedianCI(dm), MedianCI(dsm)
	}
}

// rows adds the headline rows.
func (d *latencyData) rows(res *Result, env *Env) {
	res.Add(d.setup, "lease to end (Preon's measure), mean ± sd over all tasks (ms)", fmt.Sprintf("%.2f ± %.2f", d.st.Mean, d.st.SD), fmt.Sprintf("%.2f ± %.2f", preonLatencyMeanMS, preonLatencySDMS))
	res.Add(d.setup, "lease to end, a run's mean (ms), median [95% CI]; p50 / p99 of all", d.leaseCI.Format(f2)+fmt.Sprintf("; %.2f / %.2f", d.st.P50, d.st.P99), "")
	res.Add(d.setup, "submission (p2pc run start) to result, a run's mean (ms), median [95% CI]; p50 / p99 of all", d.startCI.Format(f1)+fmt.Sprintf("; %.1f / %.1f", d.startSt.P50, d.startSt.P99), "")
	if w, ok := d.worstRound(); ok {
		var p99s []float64
		for _, r := range d.runs {
			p99s = append(p99s, r.FromFirst.P99)
		}
		res.Add(d.setup, "first dispatch to result, p99 per round (ms): median [95% CI]; the worst round (the issue wants at most 20 in every round)",
			MedianCI(p99s).Format(f1)+fmt.Sprintf("; %.1f in round %d after %s, load %s", w.FromFirst.P99, w.Run, w.After, w.Load), "")
	}
	res.Add(d.setup, "first dispatch to last end (s)", fmt.Sprintf("%.3f ± %.3f", d.sp.Mean, d.sp.SD), fmt.Sprintf("%.2f ± 0.03", preonLastS))
	if d.serial != nil {
		res.Add("p2pc, 1 peer x 1 slot (unloaded), one task at a time (batch: off)", "latency mean / p50 / p99 (ms)", fmt.Sprintf("%.2f / %.2f / %.2f", d.serial.Stats.Mean, d.serial.Stats.P50, d.serial.Stats.P99), "")
		b := d.serialBatched
		res.Add("p2pc, 1 peer x 1 slot, batched (default)", "lease to end mean / p50 / p99 (ms), with the wait behind the batch's earlier tasks; all tasks' span (ms)",
			fmt.Sprintf("%.2f / %.2f / %.2f; %.1f", b.Stats.Mean, b.Stats.P50, b.Stats.P99, 1000*b.MakespanS), "")
	}
	if d.dask != nil {
		who := fmt.Sprintf("Dask, standing cluster %d workers x %d threads", d.dask.Workers, d.dask.Threads)
		res.Add(who, "submit (client connected) to result, a round's mean (ms), median [95% CI]; p50 / p99 of all",
			d.daskCI.Format(f2)+fmt.Sprintf("; %.2f / %.2f", d.daskSt.P50, d.daskSt.P99), "")
		res.Add(who, "submission (client process start) to result, a round's mean (ms), median [95% CI]; p50 / p99 of all",
			d.daskStartCI.Format(f1)+fmt.Sprintf("; %.1f / %.1f", d.daskStartSt.P50, d.daskStartSt.P99), "")
	} else {
		res.Add("Dask", "submit to result", skipped(d.derr), "")
	}
	res.Note("%d echo tasks on %d peers x %d slots, %d runs (Preon: 200 echo jobs, 10 peers x 20 at once, 10 runs); all peers share this machine's %d cores. Like for like: submission to result is measured from a process's start for both systems (p2pc run; Dask's client process of a standing cluster); lease to end (Preon's measure) and Dask's submit to result leave out the start-up, enrolment and connection", d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, d.cfg.Runs, env.Machine.Cores)
}

// writeData writes latency.json and latency.csv.
func (d *latencyData) writeData(env *Env) error {
	if err := env.WriteJSON("latency.json", map[string]any{
		"machine": env.Machine, "config": d.cfg, "quick": env.Quick, "runs": d.runs, "latency_ms": d.st, "makespan_s": d.sp,
		"serial": d.serial, "serial_batched": d.serialBatched, "dask": d.dask, "dask_latency_ms": d.daskSt, "dask_skipped": errString(d.derr),
		"preon": map[string]float64{"mean_ms": preonLatencyMeanMS, "sd_ms": preonLatencySDMS, "last_end_s": preonLastS},
		"definitions": map[string]string{
			"serial":     "1 peer x 1 slot, the tasks one at a time (batch: off): the unloaded cost of one task; serial_batched: the same job batched as by default",
			"latency":    "from report.json attempts: start = the coordinator issued the lease, end = the peer finished the task (one clock: all processes run on this machine)",
			"makespan_s": "first lease issued to the last task's end",
			"dask":       "a standing LocalCluster; per round one client process: client.map of all tasks at once; per task, submit until its result reached the client (as_completed)",
			"from_start": "p2pc: the p2pc run process's start to the attempt's end on the peer; Dask: the client process's start to the result at the client",
		},
	}); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range d.runs {
		for i, l := range r.Latency {
			rows = append(rows, []string{"p2pc", fmt.Sprint(r.Run), fmt.Sprint(i), l.Task, l.Peer, f3(msOf(l.Dispatch)), f3(msOf(l.Latency))})
		}
	}
	for _, s := range []struct {
		sys string
		r   *latencyRun
	}{{"p2pc-1x1", d.serial}, {"p2pc-1x1-batched", d.serialBatched}} {
		if s.r == nil {
			continue
		}
		for i, l := range s.r.Latency {
			rows = append(rows, []string{s.sys, fmt.Sprint(l.Run), fmt.Sprint(i), l.Task, l.Peer, f3(msOf(l.Dispatch)), f3(msOf(l.Latency))})
		}
	}
	if d.dask != nil {
		for ri, r := range d.dask.Runs {
			for i, ms := range r.LatenciesMS {
				rows = append(rows, []string{"dask", fmt.Sprint(ri + 1), fmt.Sprint(i), fmt.Sprint(i), "", "0", f3(ms)})
			}
		}
	}
	if err := env.WriteCSV("latency.csv", []string{"system", "run", "order", "task", "peer", "dispatch_ms", "latency_ms"}, rows); err != nil {
		return err
	}

	return nil
}

// writePlot writes latency.svg: latency by dispatch order, every run
// overlaid (Preon's Figure 4).
func (d *latencyData) writePlot(env *Env) error {
	var xs, ys, dx, dy []float64
	for _, r := range d.runs {
		for i, l := range r.Latency {
			xs, ys = append(xs, float64(i)), append(ys, msOf(l.Latency))
		}
	}
	series := []Series{{Name: fmt.Sprintf("p2pc (%d runs)", len(d.runs)), X: xs, Y: ys, Kind: Points, Radius: 2}}
	if d.dask != nil {
		for _, r := range d.dask.Runs {
			for i, ms := range r.LatenciesMS {
				dx, dy = append(dx, float64(i)), append(dy, ms)
			}
		}
		series = append(series, Series{Name: fmt.Sprintf("Dask (%d runs)", len(d.dask.Runs)), X: dx, Y: dy, Kind: Points, Radius: 2})
	}
	if err := env.WriteSVG("latency.svg", (&Plot{
		Title:  "Time from dispatch to the end of the task (cf. Preon Figure 4)",
		XLabel: "task number, in dispatch order", YLabel: "milliseconds",
		Series: series,
		HLines: []HLine{
			{Y: preonLatencyMeanMS, Label: fmt.Sprintf("Preon mean %.2f ms", preonLatencyMeanMS), Color: "#D55E00", Dashed: true},
			{Y: d.st.Mean, Label: fmt.Sprintf("p2pc mean %.2f ms", d.st.Mean), Color: "#0072B2"},
		},
		YZero: true,
		Note:  fmt.Sprintf("%d echo tasks dispatched at once to %d peers x %d slots sharing %d cores; %s", d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, env.Machine.Cores, quickNote(env)),
	}).SVG()); err != nil {
		return err
	}

	return nil
}

// writeSummary writes summary.md.
func (d *latencyData) writeSummary(env *Env) error {
	var md Markdown
	md.P("# Dispatch latency (Preon 4.3)")
	md.P("%s", quickBanner(env))
	md.P("**Workload.** %d echo tasks (`plugins/echo` returns its parameters; [job.yaml](job.yaml)) dispatched at once to %d peers x %d slots, %d times, after two warm-up jobs that start every peer's plugin processes and one unmeasured run of the job itself (a peer keeps a job's plugin processes warm for a rerun of that job only). Preon: 200 echo jobs, 10 peers working on 20 at once, 10 runs.", d.cfg.Tasks, d.cfg.Peers, d.cfg.Slots, d.cfg.Runs)
	md.P("**Latency** is taken from report.json: an attempt's start is when the coordinator issued the lease, its end when the peer finished the task — Preon's \"time for a job to finish being executed by a peer after being dispatched by the master\". All processes run on this machine, so both times come from one clock.")
	trow := func(name string, s Stats, paper string) []string {
		return []string{name, fmt.Sprint(s.N), f2(s.Mean), f2(s.SD), f2(s.P50), f2(s.P90), f2(s.P99), f2(s.Max), paper}
	}
	tab := [][]string{trow(d.setup, d.st, fmt.Sprintf("%.2f ± %.2f", preonLatencyMeanMS, preonLatencySDMS))}
	if d.serial != nil {
		tab = append(tab, trow("p2pc, 1 peer x 1 slot, one task at a time (batch: off)", d.serial.Stats, ""),
			trow("p2pc, 1 peer x 1 slot, batched (default)", d.serialBatched.Stats, ""))
	}
	tab = append(tab, trow(d.setup+", submission (p2pc run start) to result", d.startSt, ""))
	if d.dask != nil {
		tab = append(tab, trow(fmt.Sprintf("Dask, standing LocalCluster %d workers x %d threads, submit (client connected) to result", d.dask.Workers, d.dask.Threads), d.daskSt, ""),
			trow("Dask, submission (client process start) to result", d.daskStartSt, ""))
	}
	md.Table([]string{"system, which latency", "tasks", "mean (ms)", "sd", "p50", "p90", "p99", "max", "Preon mean ± sd"}, tab)
	md.P("**Like for like.** *Submission to result* starts when the user's command starts: `p2pc run` for p2pc (so it holds the plugin check, enrolment of the peers and dispatch), the client process of a standing Dask cluster for Dask (interpreter, import, connect, submit). *Lease to end* (Preon's measure) and Dask's *submit to result* start once the work is handed out and leave that out. Per run, the mean of each; over the runs, the median with its 95%% bootstrap interval: p2pc lease to end %s ms, submission to result %s ms; Dask submit to result %s ms, submission to result %s ms.",
		d.leaseCI.Format(f2), d.startCI.Format(f1), d.daskCI.Format(f2), d.daskStartCI.Format(f1))
	md.P("First dispatch to the last task's end: **%.3f s ± %.3f s** over %d runs (Preon: %.2f s ± 0.03 s).", d.sp.Mean, d.sp.SD, d.sp.N, preonLastS)
	md.P("With every task dispatched at once, a task's latency is mostly its wait for a core: %d peers' worth of work runs on %d cores, so the later tasks of a burst wait for the earlier ones (Preon's peers each had their own machine). The 1 peer x 1 slot rows run %d tasks one after another: *one task at a time* (`batch: off`) shows the cost of one dispatch on an idle system (the peer's prefetch window still queues one task behind the running one); *batched*, as by default, the peer gets the tasks in batches, so a task's lease to end holds its wait behind the earlier tasks of its batch: its latency is higher while the job as a whole ends sooner (span of all tasks: %.1f ms batched, %.1f ms one at a time). %s",
		d.cfg.Peers, env.Machine.Cores, d.cfg.SerialTasks, 1000*spanOr0(d.serialBatched), 1000*spanOr0(d.serial), skipLine("Dask", d.derr))
	md.P("![latency by dispatch order](latency.svg)")
	md.P("Files: latency.json (every task of every run), latency.csv, latency.svg, job.yaml.")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return err
	}
	return nil
}

// serialRounds is how many times each 1 x 1 job runs, the two kinds
// taking turns (the machine's load drifts alike over both).
const serialRounds = 2

// serialLatency measures n echo tasks on one peer with one slot, one task
// at a time (batch: off: the unloaded cost of one task) and batched as by
// default (a task waits behind the earlier tasks of its batch), the two
// jobs taking turns. A run's MakespanS is the mean over its rounds; Run
// in each Latency is its round.
func (e *Env) serialLatency(ctx context.Context, plugin string, n int) (alone, batched *latencyRun, err error) {
	offSpec, err := e.WriteSpec("latency-serial", JobSpec{Name: "bench-latency-serial", Plugin: plugin, Tasks: []any{Range("i", n)}, Timeout: "1m", Batch: "off"})
	if err != nil {
		return nil, nil, err
	}
	batchSpec, err := e.WriteSpec("latency-serial-batched", JobSpec{Name: "bench-latency-serial-batched", Plugin: plugin, Tasks: []any{Range("i", n)}, Timeout: "1m"})
	if err != nil {
		return nil, nil, err
	}
	lab, err := e.NewLab(ctx, []harness.PeerSpec{{Name: "solo", Slots: 1}})
	if err != nil {
		return nil, nil, err
	}
	defer lab.Close()
	alone, batched = &latencyRun{Run: 1}, &latencyRun{Run: 1}
	for round := range serialRounds + 1 { // round 0 warms both jobs' plugin processes
		for _, c := range []struct {
			spec string
			r    *latencyRun
		}{{offSpec, alone}, {batchSpec, batched}} {
			sub, err := e.Submit(ctx, lab, c.spec, harness.SubmitOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("serial latency (round %d): %w", round, err)
			}
			if round == 0 {
				continue
			}
			c.r.MakespanS += SpanOf(sub.Report).Makespan().Seconds() / serialRounds
			ls := Latencies(sub.Report)
			for i := range ls {
				ls[i].Run = round
			}
			c.r.Latency = append(c.r.Latency, ls...)
		}
	}
	alone.Stats, batched.Stats = Summarise(latMS(alone.Latency)), Summarise(latMS(batched.Latency))
	return alone, batched, lab.Close()
}

// spanOr0 is r's span of all tasks in seconds, 0 for nil.
func spanOr0(r *latencyRun) float64 {
	if r == nil {
		return 0
	}
	return r.MakespanS
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latMS(ls []Latency) []float64 {
	out := make([]float64, len(ls))
	for i, l := range ls {
		out[i] = msOf(l.Latency)
	}
	return out
}

// fromStartMS is per latency (in its order) the time from the submitter
// process's start to the attempt's end, in ms.
func fromStartMS(rep *report.Report, ls []Latency, started time.Time) []float64 {
	span := SpanOf(rep)
	out := make([]float64, len(ls))
	for i, l := range ls {
		end := span.First.Add(l.Dispatch + l.Latency)
		out[i] = msOf(end.Sub(started))
	}
	return out
}
