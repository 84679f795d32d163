package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

func init() { Register(gaSuite{}) }

// gaSuite is Fenech & Vella's own evaluation (section 5, Figure 4): the
// island-model genetic algorithm for the TSP (plugins/tspga), interbreeding
// through job-global variables, measured on heterogeneous setups at
// several problem sizes: every peer alone (R_Mi), then each setup
// together (R_H); S_H, S_H,max and efficiency per size.
type gaSuite struct{}

func (gaSuite) Info() Info {
	return Info{Name: "ga", Title: "Island GA for the TSP on heterogeneous setups", Paper: "Fenech & Vella 5, Figure 4", Order: 20, Setups: true}
}

// gaConfig is the suite's section of benchmarks/bench.yaml.
type gaConfig struct {
	// Sizes are the problem sizes: cities of generated instances.
	Sizes []int `yaml:"sizes"`
	// Islands is the number of tasks of each job: more than the peers of
	// any setup, so that fast peers take more islands.
	Islands         int     `yaml:"islands"`
	Generations     int     `yaml:"generations"`
	Population      int     `yaml:"population"`
	MigrateEvery    int     `yaml:"migrate_every"`
	Migrants        int     `yaml:"migrants"`
	CheckpointEvery float64 `yaml:"checkpoint_every"`
	Timeout         string  `yaml:"timeout"`
}

// gaDefaults: the full run takes about 12 minutes on a 2-core machine
// with the setups of benchmarks/bench.yaml (a 400-city job is about 12
// core-seconds of work; each size is run alone at every capacity, which
// takes most of the time); quick is a smoke check, used when bench.yaml
// has no ga section.
func gaDefaults(quick bool) gaConfig {
	if quick {
		return gaConfig{Sizes: []int{30, 100}, Islands: 4, Generations: 60, Population: 32, MigrateEvery: 10, Migrants: 2, CheckpointEvery: 2, Timeout: "5m"}
	}
	return gaConfig{Sizes: []int{30, 52, 100, 200, 400}, Islands: 24, Generations: 500, Population: 64, MigrateEvery: 25, Migrants: 2, CheckpointEvery: 2, Timeout: "20m"}
}

func (c *gaConfig) validate() error {
	switch {
	case len(c.Sizes) == 0:
		return errors.New("ga: no sizes")
	case slices.ContainsFunc(c.Sizes, func(n int) bool { return n < 5 || n > 3000 }):
		return fmt.Errorf("ga: sizes %v: each must be 5 to 3000 cities", c.Sizes)
	case c.Islands < 1 || c.Generations < 1 || c.Population < 2:
		return fmt.Errorf("ga: islands %d, generations %d, population %d: need at least 1, 1, 2", c.Islands, c.Generations, c.Population)
	case c.MigrateEvery < 1 || c.Migrants < 0 || c.Migrants >= c.Population:
		return fmt.Errorf("ga: migrate_every %d, migrants %d: need migrate_every >= 1 and 0 <= migrants < population", c.MigrateEvery, c.Migrants)
	case c.CheckpointEvery < 0:
		return fmt.Errorf("ga: checkpoint_every %v must not be negative", c.CheckpointEvery)
	}
	return nil
}

// gaSize is one problem size's measurements.
type gaSize struct {
	Cities int            `json:"cities"`
	Setups []HeteroResult `json:"setups"`
}

func (gaSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg := gaDefaults(env.Quick && !hasSection(env.Config, "ga"))
	if err := env.Config.Decode("ga", env.Quick, &cfg); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	slices.Sort(cfg.Sizes)
	cfg.Sizes = slices.Compact(cfg.Sizes)
	timeout, err := time.ParseDuration(cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("ga: timeout: %w", err)
	}
	plugin, err := env.Plugin(ctx, "tspga")
	if err != nil {
		return nil, err
	}
	warm, err := env.WriteSpec("ga-warmup", JobSpec{
		Name: "bench-ga-warmup", Plugin: plugin,
		Params: map[string]any{"cities": 10, "islands": 2, "population": 8, "generations": 5, "migrate_every": 2},
		Tasks:  []any{Range("island", 2)}, Timeout: "2m",
	})
	if err != nil {
		return nil, err
	}

	phase := env.Progress.Phase("ga", Steps(env.Setups)*len(cfg.Sizes))
	var sizes []gaSize
	for _, n := range cfg.Sizes {
		name := fmt.Sprintf("ga-%d", n)
		spec, err := env.WriteSpec(name, JobSpec{
			Name: "bench-" + name, Plugin: plugin,
			Params: map[string]any{
				"instance": "random", "cities": n, "city_seed": 1,
				"islands": cfg.Islands, "population": cfg.Population, "generations": cfg.Generations,
				"migrate_every": cfg.MigrateEvery, "migrants": cfg.Migrants, "topology": "ring",
				"checkpoint_every": cfg.CheckpointEvery, "seed": 1,
			},
			Tasks: []any{Range("island", cfg.Islands)}, Timeout: cfg.Timeout, Retries: 2,
		})
		if err != nil {
			phase.Done()
			return nil, err
		}
		if err := env.KeepSpec(spec, name+".yaml"); err != nil {
			phase.Done()
			return nil, err
		}
		runs, err := env.Heterogeneous(ctx, Workload{Spec: spec, Warmup: warm, Timeout: timeout}, phase)
		if err != nil {
			phase.Done()
			return nil, fmt.Errorf("ga: %d cities: %w", n, err)
		}
		sizes = append(sizes, gaSize{Cities: n, Setups: runs})
	}
	phase.Done()
	return gaReport(env, cfg, sizes)
}

func hasSection(c *Config, suite string) bool {
	_, ok := c.Suites[suite]
	return ok
}

// gaReport writes the suite's files and returns its rows.
func gaReport(env *Env, cfg gaConfig, sizes []gaSize) (*Result, error) {
	gens := float64(cfg.Generations)
	var csvRows [][]string
	for _, sz := range sizes {
		for _, r := range sz.Setups {
			for i, s := range r.Solo {
				csvRows = append(csvRows, []string{"alone", fmt.Sprint(sz.Cities), fmt.Sprint(r.Setup.Name), fmt.Sprintf("peer%d", i+1), cpuList(s.CPU),
					fmt.Sprint(s.Tasks), f3(s.MakespanS), f3(s.WallS), f3(s.Rate), f1(s.Rate * gens), "", "", ""})
			}
			t := r.Together
			csvRows = append(csvRows, []string{"together", fmt.Sprint(sz.Cities), fmt.Sprint(r.Setup.Name), "all", cpuList(t.CPU),
				fmt.Sprint(t.Tasks), f3(t.MakespanS), f3(t.WallS), f3(t.Rate), f1(t.Rate * gens),
				f3(r.Speedup.SH), f3(r.Speedup.SHMax), f3(r.Speedup.Efficiency)})
		}
	}
	if err := env.WriteCSV("ga.csv", []string{"kind", "cities", "setup", "peer", "cpu_cores", "tasks", "makespan_s", "wall_s",
		"rate_islands_per_s", "rate_generations_per_s", "s_h", "s_h_max", "efficiency"}, csvRows); err != nil {
		return nil, err
	}
	if err := env.WriteJSON("ga.json", map[string]any{
		"machine": env.Machine, "config": cfg, "quick": env.Quick, "sizes": sizes,
		"definitions": map[string]string{
			"workload":   "one job per size: `islands` tasks, each an island of `population` tours evolving `generations` generations of a generated instance of `cities` cities, migrating through job-global variables (plugins/tspga)",
			"rate":       "islands (tasks) / makespan; makespan = first lease issued to last result, from report.json; generations/s = rate * generations",
			"r_m1":       "rate of the fastest peer alone",
			"s_h":        "R_H / R_M1",
			"s_h_max":    "sum(R_Mi) / R_M1",
			"efficiency": "S_H / S_H,max",
		},
	}); err != nil {
		return nil, err
	}

	// The setups, in the order of the first size (every size has them all).
	var setups []Setup
	if len(sizes) > 0 {
		for _, r := range sizes[0].Setups {
			setups = append(setups, r.Setup)
		}
	}
	xs := make([]float64, len(sizes))
	for i, sz := range sizes {
		xs[i] = float64(sz.Cities)
	}
	at := func(si int, f func(HeteroResult) float64) []float64 {
		ys := make([]float64, len(sizes))
		for i, sz := range sizes {
			ys[i] = math.NaN()
			if si < len(sz.Setups) {
				ys[i] = f(sz.Setups[si])
			}
		}
		return ys
	}
	note := fmt.Sprintf("%d islands x %d generations of %d tours per job; %s", cfg.Islands, cfg.Generations, cfg.Population, quickNote(env))
	speed := &Plot{
		Title: "Island GA: speedup S_H vs problem size (after Fenech & Vella, Figure 4)", XLabel: "problem size (cities)", YLabel: "speedup S_H = R_H / R_M1",
		YZero:  true,
		HLines: []HLine{{Y: 1, Label: "reference: fastest peer alone", Color: "#999"}},
		Note:   note,
	}
	eff := &Plot{
		Title: "Island GA: heterogeneous efficiency S_H / S_H,max", XLabel: "problem size (cities)", YLabel: "efficiency (%)",
		YZero: true, YMax: 110, Note: note,
	}
	for si, s := range setups {
		color := Palette[si%len(Palette)]
		shmax := at(si, func(r HeteroResult) float64 { return r.Speedup.SHMax })
		speed.Series = append(speed.Series,
			Series{Name: s.Label(), X: xs, Y: at(si, func(r HeteroResult) float64 { return r.Speedup.SH }), Kind: LinePoints, Color: color},
			Series{Name: fmt.Sprintf("%d peers: S_H,max (%s)", len(s.CPU), f2(mean(shmax))), X: xs, Y: shmax, Kind: Line, Color: color, Dashed: true})
		eff.Series = append(eff.Series, Series{Name: s.Label(), X: xs, Y: at(si, func(r HeteroResult) float64 { return 100 * r.Speedup.Efficiency }), Kind: LinePoints, Color: color})
		if e, ok := fenechEfficiency[len(s.CPU)]; ok {
			eff.HLines = append(eff.HLines, HLine{Y: 100 * e, Label: fmt.Sprintf("Fenech & Vella, %d machines, largest size: %s", len(s.CPU), pct(e)), Color: color, Dashed: true})
		}
	}
	if err := env.WriteSVG("speedup.svg", speed.SVG()); err != nil {
		return nil, err
	}
	if err := env.WriteSVG("efficiency.svg", eff.SVG()); err != nil {
		return nil, err
	}

	res := &Result{}
	var md Markdown
	md.P("# Island GA for the TSP on heterogeneous setups (Fenech & Vella 5, Figure 4)")
	md.P("%s", quickBanner(env))
	md.P("**Workload.** For each problem size, one job of %d tasks, each an island of the genetic algorithm of `plugins/tspga`: %d tours of a generated instance (uniform random cities, `city_seed` 1) evolved for %d generations by tournament selection, order crossover, double-bridge mutation, 2-opt and Or-opt local search, and elitist replacement. Every %d generations an island stores its %d best tours in a job-global variable and takes in its ring neighbour's (Fenech's interbreeding through a synchronized global variable, here held by the job's coordinator); it checkpoints every %v s. The exact specs are ga-<cities>.yaml.",
		cfg.Islands, cfg.Population, cfg.Generations, cfg.MigrateEvery, cfg.Migrants, cfg.CheckpointEvery)
	md.P("**Peers.** Real `p2pc join` processes, each in its own network namespace (lab mode %s), each held to its capacity by a CFS quota (%s) covering its plugin processes; one slot each, so a peer evolves one island at a time, as Fenech's dedicated peer per virtual thread. The submitter and coordinator (`p2pc run --local-slots 0`) run unthrottled in a namespace of their own.", env.Mode(), env.Machine.Cgroup)
	md.P("**Method (Fenech & Vella).** Each capacity runs the job alone (R_Mi), then each setup runs it together (R_H); rates are islands per second over the makespan (first lease issued to last result, report.json) after a warm-up job, so generations per second are the rate times %d. S_H = R_H / R_M1, S_H,max = ΣR_Mi / R_M1, efficiency = S_H / S_H,max. Fenech ran one island per peer; here the job has more islands than any setup has peers and peers pull them, fast ones taking more, since p2pc schedules that way (a fixed island per peer would leave fast peers idle waiting for the slowest).", cfg.Generations)
	var rows [][]string
	for _, sz := range sizes {
		for _, r := range sz.Setups {
			var solo []string
			for _, s := range r.Solo {
				solo = append(solo, f1(s.Rate*gens))
			}
			paper := "–"
			if e, ok := fenechEfficiency[len(r.Setup.CPU)]; ok && sz.Cities == sizes[len(sizes)-1].Cities {
				paper = pct(e)
			}
			rows = append(rows, []string{fmt.Sprint(sz.Cities), r.Setup.Label(), strings.Join(solo, ", "), f1(r.Together.Rate * gens),
				f2(r.Speedup.SH), f2(r.Speedup.SHMax), f2(quotaSHMax(r.Setup)), "**" + pct(r.Speedup.Efficiency) + "**", paper, f2(r.Together.MakespanS), sharesNote(r.Together.Shares)})
		}
	}
	md.Table([]string{"cities", "setup", "R_Mi alone (generations/s)", "R_H (generations/s)", "S_H", "S_H,max", "S_H,max of the quotas", "efficiency", "Fenech & Vella", "T_H (s)", "islands per peer"}, rows)
	md.P("S_H,max of the quotas is Σc_i / c_1 for capacities c_i: what S_H,max would be if every peer's rate were proportional to its quota. Measured S_H,max far from it means the solo runs were disturbed (a busy machine: see the load average in machine.md) or that fixed costs, not the CPU, limit the rate.")
	if dev := gaQuotaDeviation(sizes); dev > 0.1 {
		res.Note("measured S_H,max deviates from the quotas' Σc_i/c_1 by up to %.0f%%: solo rates were disturbed (busy machine?) or latency-bound; efficiencies are correspondingly uncertain", 100*dev)
	}
	md.P("![speedup vs problem size](speedup.svg)\n\n![efficiency vs problem size](efficiency.svg)")
	md.P("Fenech & Vella report, for their largest problem size, 95.7%% / 94.2%% / 93.0%% on 2 / 3 / 4 machines, and substantial initialization costs that level out as the problem grows; their sizes and machines are not given. Here the fixed costs per island (dispatch, plugin call, instance generation, enrolment) weigh most at the smallest size, where an island takes a fraction of a second.")
	md.P("Files: ga.json (all measurements), ga.csv, speedup.svg, efficiency.svg, ga-<cities>.yaml.")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return nil, err
	}

	if len(sizes) > 0 {
		last := sizes[len(sizes)-1]
		for _, r := range last.Setups {
			paper := "–"
			if e, ok := fenechEfficiency[len(r.Setup.CPU)]; ok {
				paper = pct(e) + " (largest size)"
			}
			res.Add(r.Setup.Label(), fmt.Sprintf("efficiency at %d cities", last.Cities), pct(r.Speedup.Efficiency), paper)
			res.Add(r.Setup.Label(), fmt.Sprintf("S_H (S_H,max) at %d cities", last.Cities), f2(r.Speedup.SH)+" ("+f2(r.Speedup.SHMax)+")", "")
		}
		first := sizes[0]
		if first.Cities != last.Cities {
			for _, r := range first.Setups {
				res.Add(r.Setup.Label(), fmt.Sprintf("efficiency at %d cities", first.Cities), pct(r.Speedup.Efficiency), "")
			}
		}
	}
	res.Note("Fenech & Vella's GA ran one island per .NET peer at undisclosed sizes; here %d islands per job on sizes %v cities, %d generations of %d tours, peers of 0.3-0.9 cores of quota", cfg.Islands, cfg.Sizes, cfg.Generations, cfg.Population)
	return res, nil
}

// quotaSHMax is S_H,max if rates were proportional to the CPU quotas.
func quotaSHMax(s Setup) float64 {
	if len(s.CPU) == 0 {
		return math.NaN()
	}
	return s.Total() / slices.Max(s.CPU)
}

// gaQuotaDeviation is the largest relative difference between a measured
// S_H,max and that of the quotas.
func gaQuotaDeviation(sizes []gaSize) float64 {
	dev := 0.0
	for _, sz := range sizes {
		for _, r := range sz.Setups {
			if q := quotaSHMax(r.Setup); q > 0 && r.Speedup.SHMax > 0 {
				dev = math.Max(dev, math.Abs(r.Speedup.SHMax-q)/q)
			}
		}
	}
	return dev
}

func mean(xs []float64) float64 {
	s, n := 0.0, 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}
