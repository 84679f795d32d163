package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

func init() { Register(mandelbrotSuite{}) }

// fenechEfficiency is Fenech & Vella's efficiency for their largest
// problem size, by number of machines in the setup.
var fenechEfficiency = map[int]float64{2: 0.957, 3: 0.942, 4: 0.930}

// mandelbrotSuite is Preon 4.1 (a farm of 256 Mandelbrot jobs) measured
// with Fenech & Vella's heterogeneous speedup: each peer alone, then the
// setup together.
type mandelbrotSuite struct{}

func (mandelbrotSuite) Info() Info {
	return Info{Name: "mandelbrot", Title: "Mandelbrot farm on heterogeneous setups", Paper: "Preon 4.1 + Fenech & Vella 5", Order: 10, Setups: true}
}

type mandelbrotConfig struct {
	Width   int    `yaml:"width"`
	Height  int    `yaml:"height"`
	MaxIter int    `yaml:"max_iter"`
	Tasks   int    `yaml:"tasks"`
	Rounds  int    `yaml:"rounds"` // rounds of solo and together runs (see Workload); >= 5 for an interval
	Timeout string `yaml:"timeout"`
	// KeepCoresBusy: an idle-priority spinner on every core during the
	// measurements (Workload.KeepCoresBusy).
	KeepCoresBusy bool `yaml:"keep_cores_busy"`
}

func (mandelbrotSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg, timeout, err := mandelbrotSetupConfig(env)
	if err != nil {
		return nil, err
	}
	spec, warm, err := mandelbrotSpecs(ctx, env, cfg)
	if err != nil {
		return nil, err
	}
	runs, err := mandelbrotMeasure(ctx, env, cfg, spec, warm, timeout)
	if err != nil {
		return nil, err
	}
	res, outs, csvRows := mandelbrotTabulate(runs)
	if err := mandelbrotWriteData(env, cfg, outs, csvRows); err != nil {
		return nil, err
	}
	if err := mandelbrotWritePlots(env, cfg, outs); err != nil {
		return nil, err
	}
	if err := mandelbrotWriteSummary(env, cfg, runs, outs); err != nil {
		return nil, err
	}
	sized := ""
	if !env.Quick {
		sized = fmt.Sprintf("; until issue 19 4096x2048, about 7 core-seconds, in 2 rounds: made smaller so that %d rounds fit the 30-minute run, while a together run still takes over a second", cfg.Rounds)
	}
	res.Note("Preon: 256 jobs of a 4096x4096 image at 4096 iterations each; here one %dx%d image at %d iterations in %d bands (%s of single-core work%s), peers of 0.3-0.9 cores of quota instead of 16-thread DAS-5 nodes; figures are medians of %d rounds [95%% bootstrap CI]; every run a job of its own, its plugin start counted alone and together alike (it weighs most on the short together runs)", cfg.Width, cfg.Height, cfg.MaxIter, cfg.Tasks, workNote(runs), sized, cfg.Rounds)
	return res, nil
}

// mandelbrotSetup is one setup's measurements with the bounds they are
// compared with.
type mandelbrotSetup struct {
	HeteroResult
	LowerBoundS float64 `json:"lower_bound_s"`       // N / sum(R_Mi): the time at efficiency 1
	PreonBoundS float64 `json:"preon_bound_s"`       // T_M1 / n: Preon's local_time / n
	TM1S        float64 `json:"fastest_peer_time_s"` // N / R_M1
}

// mandelbrotSetupConfig reads and checks the suite's configuration.
func mandelbrotSetupConfig(env *Env) (mandelbrotConfig, time.Duration, error) {
	cfg := mandelbrotConfig{Width: 2048, Height: 1536, MaxIter: 1200, Tasks: 256, Rounds: 5, Timeout: "10m", KeepCoresBusy: true}
	if err := env.Config.Decode("mandelbrot", env.Quick, &cfg); err != nil {
		return cfg, 0, err
	}
	if cfg.Tasks < 1 || cfg.Tasks > cfg.Height {
		return cfg, 0, fmt.Errorf("mandelbrot: tasks %d must be in [1, height %d]", cfg.Tasks, cfg.Height)
	}
	if cfg.Rounds < 1 || cfg.Rounds > 20 {
		return cfg, 0, fmt.Errorf("mandelbrot: rounds %d: want 1 to 20 (5 or more for a confidence interval)", cfg.Rounds)
	}
	timeout, err := time.ParseDuration(cfg.Timeout)
	if err != nil {
		return cfg, 0, fmt.Errorf("mandelbrot: timeout: %w", err)
	}
	return cfg, timeout, nil
}

// mandelbrotSpecs writes the job spec (kept with the results) and the
// warm-up spec.
func mandelbrotSpecs(ctx context.Context, env *Env, cfg mandelbrotConfig) (spec, warm string, err error) {
	plugin, err := env.Plugin(ctx, "mandelbrot")
	if err != nil {
		return "", "", err
	}
	params := map[string]any{"width": cfg.Width, "height": cfg.Height, "max_iter": cfg.MaxIter, "bands": cfg.Tasks}
	spec, err = env.WriteSpec("mandelbrot", JobSpec{
		Name: "bench-mandelbrot", Plugin: plugin, Params: params,
		Tasks: []any{Range("band", cfg.Tasks)}, Timeout: cfg.Timeout, Retries: 2,
	})
	if err != nil {
		return "", "", err
	}
	warm, err = env.WriteSpec("mandelbrot-warmup", JobSpec{
		Name: "bench-mandelbrot-warmup", Plugin: plugin,
		Params: map[string]any{"width": 64, "height": 64, "max_iter": 10, "bands": 8},
		Tasks:  []any{Range("band", 8)}, Timeout: "1m",
	})
	if err != nil {
		return "", "", err
	}
	if err := env.KeepSpec(spec, "job.yaml"); err != nil {
		return "", "", err
	}
	return spec, warm, nil
}

// mandelbrotMeasure runs the workload on every setup: each peer alone,
// then together.
func mandelbrotMeasure(ctx context.Context, env *Env, cfg mandelbrotConfig, spec, warm string, timeout time.Duration) ([]HeteroResult, error) {
	if env.Quick {
		warm = "" // a smoke check: no warm-up runs
	}
	w := Workload{Spec: spec, Warmup: warm, Timeout: timeout, Rounds: cfg.Rounds, KeepCoresBusy: cfg.KeepCoresBusy}
	phase := env.Progress.Phase("mandelbrot", w.Steps(env.Setups))
	runs, err := env.Heterogeneous(ctx, w, phase)
	phase.Done()
	return runs, err
}

// mandelbrotTabulate computes each setup's bounds, the result rows and the
// CSV rows.
func mandelbrotTabulate(runs []HeteroResult) (res *Result, outs []mandelbrotSetup, csvRows [][]string) {
	res = &Result{}
	for _, r := range runs {
		n := float64(r.Together.Tasks)
		o := mandelbrotSetup{HeteroResult: r}
		if r.Speedup.SumRM > 0 {
			o.LowerBoundS = n / r.Speedup.SumRM
		}
		if r.Speedup.RM1 > 0 {
			o.TM1S = n / r.Speedup.RM1
			o.PreonBoundS = o.TM1S / float64(len(r.Setup.CPU))
		}
		outs = append(outs, o)
		for i, s := range r.Solo {
			csvRows = append(csvRows, []string{"alone", fmt.Sprint(r.Setup.Name), fmt.Sprintf("peer%d", i+1), cpuList(s.CPU),
				fmt.Sprint(s.Tasks), f3(s.MakespanS), f3(s.WallS), f3(s.Rate), "", "", "", ""})
		}
		t := r.Together
		csvRows = append(csvRows, []string{"together", fmt.Sprint(r.Setup.Name), "all", cpuList(t.CPU),
			fmt.Sprint(t.Tasks), f3(t.MakespanS), f3(t.WallS), f3(t.Rate),
			f3(r.Speedup.SH), f3(r.Speedup.SHMax), f3(r.Speedup.Efficiency), f3(o.LowerBoundS)})
		paper := "–"
		if e, ok := fenechEfficiency[len(r.Setup.CPU)]; ok {
			paper = pct(e) + " (Fenech & Vella, GA, " + fmt.Sprint(len(r.Setup.CPU)) + " machines)"
		}
		res.Add(r.Setup.Label(), "efficiency S_H/S_H,max, median [95% CI]", r.EfficiencyText(), paper)
		res.Add(r.Setup.Label(), "S_H [95% CI] (S_H,max)", r.SH.Format(f2)+" ("+f2(r.Speedup.SHMax)+")", "")
		res.Add(r.Setup.Label(), "makespan T_H, first lease to last result, s [95% CI] (lower bound N/ΣR_Mi)", r.MakespanCI.Format(f2)+" ("+f2(o.LowerBoundS)+")", "")
		res.Add(r.Setup.Label(), "whole command, p2pc run start to exit, s [95% CI]", r.WallCI.Format(f2), "")
		if r.Suspect() {
			res.Note("⚠ setup %d: the efficiency's whole interval lies above 100%% (%s): a measurement problem, not a result", r.Setup.Name, r.Efficiency.Pct())
		}
	}
	return res, outs, csvRows
}

// mandelbrotWriteData writes mandelbrot.json and mandelbrot.csv.
func mandelbrotWriteData(env *Env, cfg mandelbrotConfig, outs []mandelbrotSetup, csvRows [][]string) error {
	if err := env.WriteJSON("mandelbrot.json", map[string]any{
		"machine": env.Machine, "config": cfg, "quick": env.Quick, "setups": outs,
		"definitions": map[string]string{
			"rate":          "tasks / makespan; makespan = first lease issued to last result, from report.json",
			"r_m1":          "rate of the fastest peer alone",
			"s_h":           "R_H / R_M1",
			"s_h_max":       "sum(R_Mi) / R_M1",
			"efficiency":    "S_H / S_H,max",
			"lower_bound_s": "tasks / sum(R_Mi): the setup's time at efficiency 1",
			"preon_bound_s": "(tasks / R_M1) / n: Preon's local time divided by the number of peers",
		},
	}); err != nil {
		return err
	}
	if err := env.WriteCSV("mandelbrot.csv", []string{"kind", "setup", "peer", "cpu_cores", "tasks", "makespan_s", "wall_s",
		"rate_tasks_per_s", "s_h", "s_h_max", "efficiency", "lower_bound_s"}, csvRows); err != nil {
		return err
	}
	return nil
}

// mandelbrotWritePlots writes time.svg and efficiency.svg.
func mandelbrotWritePlots(env *Env, cfg mandelbrotConfig, outs []mandelbrotSetup) error {
	cats := make([]string, len(outs))
	measured, lower, preon, eff, fen, target := nan(len(outs)), nan(len(outs)), nan(len(outs)), nan(len(outs)), nan(len(outs)), nan(len(outs))
	mLo, mHi, eLo, eHi := nan(len(outs)), nan(len(outs)), nan(len(outs)), nan(len(outs))
	for i, o := range outs {
		cats[i] = o.Setup.Label()
		measured[i], lower[i], preon[i] = o.MakespanCI.Median, o.LowerBoundS, o.PreonBoundS
		mLo[i], mHi[i] = o.MakespanCI.Lo, o.MakespanCI.Hi
		eff[i], eLo[i], eHi[i] = 100*o.Efficiency.Median, 100*o.Efficiency.Lo, 100*o.Efficiency.Hi
		if e, ok := fenechEfficiency[len(o.Setup.CPU)]; ok {
			fen[i] = 100 * e
		}
		target[i] = 95
	}
	note := fmt.Sprintf("%d tasks: one %dx%d image, max_iter %d, in %d bands; %s", cfg.Tasks, cfg.Width, cfg.Height, cfg.MaxIter, cfg.Tasks, quickNote(env))
	if err := env.WriteSVG("time.svg", (&Bars{
		Title: "Mandelbrot farm: time per setup vs the lower bound", YLabel: "seconds (first lease to last result)",
		Categories: cats,
		Groups: []BarGroup{
			{Name: "measured T_H (median, 95% CI)", Values: measured, Lo: mLo, Hi: mHi},
			{Name: "lower bound N / ΣR_Mi", Values: lower, Color: "#009E73"},
			{Name: "Preon's bound T_M1 / n", Values: preon, Color: "#E69F00"},
		},
		Format: func(v float64) string { return fmt.Sprintf("%.1f", v) },
		Note:   note,
	}).SVG()); err != nil {
		return err
	}
	if err := env.WriteSVG("efficiency.svg", (&Bars{
		Title: "Heterogeneous efficiency S_H / S_H,max", YLabel: "efficiency (%)",
		Categories: cats,
		Groups:     []BarGroup{{Name: "p2pc, Mandelbrot (median of rounds, 95% CI)", Values: eff, Lo: eLo, Hi: eHi}},
		Marks: []BarGroup{
			{Name: "Fenech & Vella, GA (largest size)", Values: fen, Color: "#D55E00"},
			{Name: "target 95%", Values: target, Color: "#444"},
		},
		Format: func(v float64) string { return fmt.Sprintf("%.1f%%", v) },
		YMax:   110,
		Note:   note,
	}).SVG()); err != nil {
		return err
	}
	return nil
}

// mandelbrotWriteSummary writes summary.md.
func mandelbrotWriteSummary(env *Env, cfg mandelbrotConfig, runs []HeteroResult, outs []mandelbrotSetup) error {
	var md Markdown
	md.P("# Mandelbrot farm on heterogeneous setups (Preon 4.1, Fenech & Vella 5)")
	md.P("%s", quickBanner(env))
	md.P("**Workload.** %d tasks rendering the bands of one %dx%d Mandelbrot image at max_iter %d (`plugins/mandelbrot`; the exact spec is [job.yaml](job.yaml)). "+
		"Preon's farm was 256 jobs, each a whole 4096x4096 image at 4096 iterations, on DAS-5 peers of 16 threads (the local reference: 506.9 s ± 3.45 s for the 256 runs, 32 at a time). "+
		"Here the same 256-way split of one image is sized to the 2-core machine: about %s of single-core work in all.",
		cfg.Tasks, cfg.Width, cfg.Height, cfg.MaxIter, workNote(runs))
	var views []setupOutView
	for _, o := range outs {
		views = append(views, setupOutView{name: o.Setup.Name, cpu: o.Setup.CPU, pins: o.Together.Pinned})
	}
	pinNote := "pinned to cores so that the capacities on each core add up to at most 0.95 (" + pinsNote(views) + "), as if each core were a machine: unpinned, single-threaded peers that share a core get about half of it each, whatever their quotas"
	if !env.Config.Pinned() {
		pinNote = "not pinned to cores (pin: false in the config)"
	}
	md.P("**Peers.** Real `p2pc join` processes, each in its own network namespace on a bridge (lab mode %s), each held to its capacity by a CFS quota (%s) that covers its plugin processes, one slot each, %s. The submitter (`p2pc run --local-slots 0`) runs unthrottled in a namespace of its own. The lab's processes run in a cgroup of the highest CPU weight, so other work on the machine disturbs them little.%s", env.Mode(), env.Machine.Cgroup, pinNote, coreFillNote(cfg.KeepCoresBusy))
	md.P("**Method (Fenech & Vella).** In each setup's lab every peer is measured alone (R_Mi: the job joined to that peer only; the peers of a lab do not know each other), then the peers together (R_H)%s. Rates are tasks per second over the makespan, from the first lease issued to the last result (report.json), after a warm-up job that gets every peer the plugin binary (a warm-up after every restart too). Each round gives S_H = R_H / R_M1, S_H,max = ΣR_Mi / R_M1 and efficiency = S_H / S_H,max from its own runs; the table shows their medians over the rounds with 95%% intervals. An interval wholly above 100%% is flagged as a measurement problem: in the earlier runs (2 ABBA rounds, means, one job rerun) the measured job's plugin processes were warm for some runs and cold for others, since a peer keeps a finished job's plugin processes for a while; now every run is a job of its own and starts cold on both sides.", roundsNote(cfg.Rounds))
	var rows [][]string
	for _, o := range outs {
		paper := "–"
		if e, ok := fenechEfficiency[len(o.Setup.CPU)]; ok {
			paper = pct(e)
		}
		var solo []string
		for _, s := range o.Solo {
			solo = append(solo, f2(s.Rate))
		}
		rows = append(rows, []string{o.Setup.Label(), strings.Join(solo, ", "), o.RH.Format(f2),
			o.SH.Format(f2), f2(o.Speedup.SHMax), "**" + o.EfficiencyText() + "**", paper,
			o.MakespanCI.Format(f2), f2(o.LowerBoundS), f2(o.PreonBoundS), o.WallCI.Format(f2), sharesNote(o.Together.Shares)})
	}
	md.P("Every figure is the median of %d rounds with its 95%% bootstrap confidence interval in brackets (percentile bootstrap of the median, harness/bench/stats.go). R_Mi alone: medians. T_H is the makespan (first lease to last result); wall is the whole command (`p2pc run` start to exit).", cfg.Rounds)
	md.Table([]string{"setup", "R_Mi alone (tasks/s)", "R_H (tasks/s)", "S_H", "S_H,max", "efficiency", "Fenech & Vella", "T_H (s)", "N/ΣR_Mi (s)", "T_M1/n (s)", "wall (s)", "tasks per peer"}, rows)
	md.P("**Rounds.** Each round's efficiency, from that round's own solo and together runs: the spread is what one measurement on this shared machine is worth.")
	md.Table([]string{"setup", "efficiency per round"}, roundRows(outsHetero(outs)))
	md.P("![time per setup](time.svg)\n\n![efficiency](efficiency.svg)")
	md.P("Fenech & Vella's figures are for their GA over .NET peers (95.7%% / 94.2%% / 93.0%% on 2 / 3 / 4 machines); Preon gives no efficiency, only the times of its Figure 2, which it found \"much slower than expected\" because every job copied 65 MiB. Here a task's input is its parameters and its output (a band) travels inline, so the farm is compute-bound as Fenech's definitions assume. Wall is the whole `p2pc run` (plugin check, enrolment, dispatch, collection).")
	md.P("Files: mandelbrot.json (all measurements), mandelbrot.csv, time.svg, efficiency.svg, job.yaml.")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return err
	}
	return nil
}

func roundsNote(r int) string {
	return fmt.Sprintf("; %d rounds, each measuring every peer alone and the setup together once, in an order rotated from round to round (the peers restarted wherever a solo run follows a together run, so that they do not know each other); every run is a job of its own, so that each starts its plugin processes cold, alone and together alike", r)
}

// outsHetero are the setups' HeteroResults.
func outsHetero(outs []mandelbrotSetup) []HeteroResult {
	var hs []HeteroResult
	for _, o := range outs {
		hs = append(hs, o.HeteroResult)
	}
	return hs
}

// roundRows lists each setup's per-round efficiencies.
func roundRows(hs []HeteroResult) [][]string {
	var rows [][]string
	for _, h := range hs {
		var e []string
		for _, r := range h.Rounds {
			e = append(e, pct(r.Efficiency))
		}
		rows = append(rows, []string{h.Setup.Label(), strings.Join(e, ", ")})
	}
	return rows
}

// pinsNote says which capacities shared a core, per setup.
func pinsNote(outs []setupOutView) string {
	var parts []string
	for _, o := range outs {
		if o.pins == nil {
			parts = append(parts, fmt.Sprintf("setup %d unpinned", o.name))
			continue
		}
		byCore := map[int][]string{}
		for i, c := range o.pins {
			byCore[c] = append(byCore[c], fmt.Sprint(o.cpu[i]))
		}
		var cores []string
		for c := 0; c < 64; c++ {
			if v, ok := byCore[c]; ok {
				cores = append(cores, strings.Join(v, "+"))
			}
		}
		parts = append(parts, strings.Join(cores, " | "))
	}
	return strings.Join(parts, "; ")
}

type setupOutView struct {
	name int
	cpu  []float64
	pins []int
}

func nan(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

func cpuList(c []float64) string {
	parts := make([]string, len(c))
	for i, x := range c {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, "+")
}

func sharesNote(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// workNote estimates the job's single-core work from a solo run: tasks
// at rate R on c cores take tasks/R * c core-seconds.
func workNote(runs []HeteroResult) string {
	for _, r := range runs {
		if len(r.Solo) > 0 && r.Solo[0].Rate > 0 {
			s := r.Solo[0]
			return fmt.Sprintf("%.1f core-seconds", float64(s.Tasks)/s.Rate*s.CPU[0])
		}
	}
	return "(unknown)"
}

func quickNote(env *Env) string {
	if env.Quick {
		return "--quick: tiny sizes, a smoke check"
	}
	return env.Machine.CPU
}

func quickBanner(env *Env) string {
	if env.Quick {
		return "**This is a `--quick` run: tiny problem sizes, a smoke check of the machinery, not a measurement.**"
	}
	return fmt.Sprintf("Measured %s on %s (%d cores), commit %.12s. Machine: [../machine.md](../machine.md).",
		env.Machine.Date.Format("2006-01-02"), env.Machine.CPU, env.Machine.Cores, env.Machine.Commit)
}
