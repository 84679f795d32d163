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
	// Islands is the number of tasks of each job: many more than the
	// peers of any setup, so that fast peers take more islands and the
	// last islands, which run while faster peers may already be idle,
	// are a small part of the job (see gaTailBound).
	Islands     int `yaml:"islands"`
	Generations int `yaml:"generations"`
	// GenerationsAt overrides Generations for some sizes, so that every
	// size's job is about as long (a small instance's generation is cheap).
	GenerationsAt   map[int]int `yaml:"generations_at"`
	Population      int         `yaml:"population"`
	MigrateEvery    int         `yaml:"migrate_every"`
	Migrants        int         `yaml:"migrants"`
	CheckpointEvery float64     `yaml:"checkpoint_every"`
	// Rounds of solo and together runs (rotated; see Workload): each gives
	// an efficiency; 5 or more for a confidence interval.
	Rounds int `yaml:"rounds"`
	// KeepCoresBusy: an idle-priority spinner on every core during the
	// measurements (Workload.KeepCoresBusy).
	KeepCoresBusy bool   `yaml:"keep_cores_busy"`
	Timeout       string `yaml:"timeout"`
}

// gaDefaults are benchmarks/bench.yaml's: the full run measures 48
// islands at two sizes, 30 cities at 160 generations and 400 at 40, each
// job about 2.5 core-seconds of work, in 5 rounds. quick is a smoke check.
func gaDefaults(quick bool) gaConfig {
	if quick {
		return gaConfig{Sizes: []int{30}, Islands: 8, Generations: 60, Population: 32, MigrateEvery: 10, Migrants: 2, CheckpointEvery: 2, Rounds: 1, KeepCoresBusy: true, Timeout: "5m"}
	}
	return gaConfig{Sizes: []int{30, 400}, Islands: 48, Generations: 40, GenerationsAt: map[int]int{30: 160}, Population: 64, MigrateEvery: 10, Migrants: 2, CheckpointEvery: 2, Rounds: 5, KeepCoresBusy: true, Timeout: "20m"}
}

// gens is the generations of the job of n cities.
func (c gaConfig) gens(n int) int {
	if g, ok := c.GenerationsAt[n]; ok && g > 0 {
		return g
	}
	return c.Generations
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
	case c.Rounds < 1 || c.Rounds > 20:
		return fmt.Errorf("ga: rounds %d: want 1 to 20 (5 or more for a confidence interval)", c.Rounds)
	}
	return nil
}

// gaWarmIslands is the number of islands of the warm-up job.
const gaWarmIslands = 4

// gaSize is one problem size's measurements.
type gaSize struct {
	Cities int            `json:"cities"`
	Setups []HeteroResult `json:"setups"`
}

func (gaSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	loadStart := loadavg()
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
	// The warm-up runs a few short islands of the largest size on each
	// peer, so that the first measurement in a lab finds the peer's plugin
	// process, its heap and the peer's caches as the later ones do.
	largest := slices.Max(cfg.Sizes)
	warm, err := env.WriteSpec("ga-warmup", JobSpec{
		Name: "bench-ga-warmup", Plugin: plugin,
		Params: map[string]any{
			"instance": "random", "cities": largest, "city_seed": 2,
			"islands": gaWarmIslands, "population": cfg.Population, "generations": max(1, min(cfg.Generations/5, 20)),
			"migrate_every": max(1, min(cfg.MigrateEvery, 5)), "migrants": cfg.Migrants, "topology": "ring", "checkpoint_every": 0, "seed": 2,
		},
		Tasks: []any{Range("island", gaWarmIslands)}, Timeout: cfg.Timeout,
	})
	if err != nil {
		return nil, err
	}

	var specs []string
	for _, n := range cfg.Sizes {
		name := fmt.Sprintf("ga-%d", n)
		spec, err := env.WriteSpec(name, JobSpec{
			Name: "bench-" + name, Plugin: plugin,
			Params: map[string]any{
				"instance": "random", "cities": n, "city_seed": 1,
				"islands": cfg.Islands, "population": cfg.Population, "generations": cfg.gens(n),
				"migrate_every": cfg.MigrateEvery, "migrants": cfg.Migrants, "topology": "ring",
				"checkpoint_every": cfg.CheckpointEvery, "seed": 1,
			},
			Tasks: []any{Range("island", cfg.Islands)}, Timeout: cfg.Timeout, Retries: 2,
		})
		if err != nil {
			return nil, err
		}
		if err := env.KeepSpec(spec, name+".yaml"); err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	if env.Quick {
		warm = "" // a smoke check: no warm-up runs
	}
	// Every size in one lab per setup, one size after the other, each in
	// rotated rounds (see heteroPlan).
	w := Workload{Warmup: warm, Timeout: timeout, Rounds: cfg.Rounds, KeepCoresBusy: cfg.KeepCoresBusy}
	phase := env.Progress.Phase("ga", w.StepsOf(env.Setups, len(specs)))
	runs, err := env.HeterogeneousJobs(ctx, w, specs, phase)
	phase.Done()
	if err != nil {
		return nil, fmt.Errorf("ga: %w", err)
	}
	sizes := make([]gaSize, len(cfg.Sizes))
	for j, n := range cfg.Sizes {
		sizes[j].Cities = n
		for _, r := range runs {
			sizes[j].Setups = append(sizes[j].Setups, r[j])
		}
	}
	return gaReport(env, cfg, sizes, [2]string{loadStart, loadavg()})
}

func hasSection(c *Config, suite string) bool {
	_, ok := c.Suites[suite]
	return ok
}

// gaReport writes the suite's files and returns its rows.
func gaReport(env *Env, cfg gaConfig, sizes []gaSize, load [2]string) (*Result, error) {
	if err := gaWriteData(env, cfg, sizes, load); err != nil {
		return nil, err
	}
	if err := gaWritePlots(env, cfg, sizes); err != nil {
		return nil, err
	}
	res := &Result{}
	if err := gaWriteSummary(env, cfg, sizes, load, res); err != nil {
		return nil, err
	}
	gaRows(res, sizes)
	for _, sz := range sizes {
		for _, r := range sz.Setups {
			if r.Suspect() {
				res.Note("⚠ setup %d at %d cities: the efficiency's whole interval lies above 100%% (%s): a measurement problem, not a result", r.Setup.Name, sz.Cities, r.Efficiency.Pct())
			}
		}
	}
	sized := ""
	if !env.Quick {
		sized = fmt.Sprintf(". Until issue 19: 120 islands of 100 generations at sizes 30, 52, 100, 200, 400 in 2 rounds (27 minutes); sized down so that %d rounds fit the 30-minute run, each job about 2.5 core-seconds (a together run over a second)", cfg.Rounds)
	}
	res.Note("Fenech & Vella's GA ran one island per .NET peer at undisclosed sizes; here %d islands per job on sizes %v cities, %s of %d tours, peers of 0.3-0.9 cores of quota; figures are medians of %d rounds [95%% bootstrap CI]; every run a job of its own, its plugin start counted alone and together alike%s", cfg.Islands, cfg.Sizes, gaGensNote(cfg), cfg.Population, cfg.Rounds, sized)
	return res, nil
}

// gaWriteData writes ga.csv and ga.json.
func gaWriteData(env *Env, cfg gaConfig, sizes []gaSize, load [2]string) error {
	var csvRows [][]string
	for _, sz := range sizes {
		gens := float64(cfg.gens(sz.Cities))
		for _, r := range sz.Setups {
			for i, s := range r.Solo {
				csvRows = append(csvRows, []string{"alone", fmt.Sprint(sz.Cities), fmt.Sprint(r.Setup.Name), fmt.Sprintf("peer%d", i+1), cpuList(s.CPU),
					fmt.Sprint(s.Tasks), f3(s.MakespanS), f3(s.WallS), f3(s.Rate), f1(s.Rate * gens), "", "", "", ""})
			}
			t := r.Together
			csvRows = append(csvRows, []string{"together", fmt.Sprint(sz.Cities), fmt.Sprint(r.Setup.Name), "all", cpuList(t.CPU),
				fmt.Sprint(t.Tasks), f3(t.MakespanS), f3(t.WallS), f3(t.Rate), f1(t.Rate * gens),
				f3(r.Speedup.SH), f3(r.Speedup.SHMax), f3(r.Speedup.Efficiency), f3(gaTail(r, cfg.Islands))})
		}
	}
	if err := env.WriteCSV("ga.csv", []string{"kind", "cities", "setup", "peer", "cpu_cores", "tasks", "makespan_s", "wall_s",
		"rate_islands_per_s", "rate_generations_per_s", "s_h", "s_h_max", "efficiency", "tail_bound"}, csvRows); err != nil {
		return err
	}
	if err := env.WriteJSON("ga.json", map[string]any{
		"machine": env.Machine, "config": cfg, "quick": env.Quick, "sizes": sizes,
		"loadavg_start": load[0], "loadavg_end": load[1],
		"definitions": map[string]string{
			"workload":   "one job per size: `islands` tasks, each an island of `population` tours evolving `generations` generations of a generated instance of `cities` cities, migrating through job-global variables (plugins/tspga)",
			"rate":       "islands (tasks) / makespan; makespan = first lease issued to last result, from report.json; generations/s = rate * generations",
			"r_m1":       "rate of the fastest peer alone",
			"s_h":        "R_H / R_M1",
			"s_h_max":    "sum(R_Mi) / R_M1",
			"efficiency": "S_H / S_H,max",
			"tail_bound": "the efficiency that pulling `islands` equal tasks onto peers of the measured solo rates reaches if only the tail (peers idle at the end) is lost",
			"rounds":     "every round measures each peer alone and the setup together once (rotated order); s_h_ci, efficiency_ci: medians of the rounds' own figures with 95% bootstrap intervals",
		},
	}); err != nil {
		return err
	}
	return nil
}

// gaSetups returns the setups, in the order of the first size (every size
// has them all).
func gaSetups(sizes []gaSize) []Setup {
	var setups []Setup
	if len(sizes) > 0 {
		for _, r := range sizes[0].Setups {
			setups = append(setups, r.Setup)
		}
	}
	return setups
}

// gaWritePlots writes speedup.svg and efficiency.svg.
func gaWritePlots(env *Env, cfg gaConfig, sizes []gaSize) error {
	setups := gaSetups(sizes)
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
	note := fmt.Sprintf("%d islands x %s of %d tours per job; medians of %d rounds, bars: 95%% CI; %s", cfg.Islands, gaGensNote(cfg), cfg.Population, cfg.Rounds, quickNote(env))
	speed := &Plot{
		Title: "Island GA: speedup S_H vs problem size (after Fenech & Vella, Figure 4)", XLabel: "problem size (cities)", YLabel: "speedup S_H = R_H / R_M1",
		YZero:  true,
		HLines: []HLine{{Y: 1, Label: "reference: fastest peer alone", Color: "#999"}},
		Note:   note,
	}
	eff := &Plot{
		Title: "Island GA: heterogeneous efficiency S_H / S_H,max", XLabel: "problem size (cities)", YLabel: "efficiency (%)",
		YZero: true, YMax: gaEffYMax(sizes), Note: note,
	}
	for si, s := range setups {
		color := Palette[si%len(Palette)]
		shmax := at(si, func(r HeteroResult) float64 { return r.Speedup.SHMax })
		speed.Series = append(speed.Series,
			Series{Name: s.Label(), X: xs, Y: at(si, func(r HeteroResult) float64 { return r.SH.Median }), Kind: LinePoints, Color: color,
				Lo: at(si, func(r HeteroResult) float64 { return r.SH.Lo }), Hi: at(si, func(r HeteroResult) float64 { return r.SH.Hi })},
			Series{Name: fmt.Sprintf("%d peers: S_H,max (%s)", len(s.CPU), f2(mean(shmax))), X: xs, Y: shmax, Kind: Line, Color: color, Dashed: true})
		eff.Series = append(eff.Series,
			Series{Name: s.Label(), X: xs, Y: at(si, func(r HeteroResult) float64 { return 100 * r.Efficiency.Median }), Kind: LinePoints, Color: color,
				Lo: at(si, func(r HeteroResult) float64 { return 100 * r.Efficiency.Lo }), Hi: at(si, func(r HeteroResult) float64 { return 100 * r.Efficiency.Hi })},
			Series{Name: fmt.Sprintf("%d peers: tail bound (dots)", len(s.CPU)), X: xs, Y: at(si, func(r HeteroResult) float64 { return 100 * gaTail(r, cfg.Islands) }), Kind: Points, Color: color, Radius: 1.8})
		if e, ok := fenechEfficiency[len(s.CPU)]; ok {
			eff.HLines = append(eff.HLines, HLine{Y: 100 * e, Label: fmt.Sprintf("Fenech & Vella, %d machines, largest size: %s", len(s.CPU), pct(e)), Color: color, Dashed: true})
		}
	}
	if err := env.WriteSVG("speedup.svg", speed.SVG()); err != nil {
		return err
	}
	if err := env.WriteSVG("efficiency.svg", eff.SVG()); err != nil {
		return err
	}
	return nil
}

// gaWriteSummary writes summary.md, adding to res a note on disturbed
// measurements.
func gaWriteSummary(env *Env, cfg gaConfig, sizes []gaSize, load [2]string, res *Result) error {
	setups := gaSetups(sizes)
	var md Markdown
	md.P("# Island GA for the TSP on heterogeneous setups (Fenech & Vella 5, Figure 4)")
	md.P("%s", quickBanner(env))
	md.P("**Workload.** For each problem size, one job of %d tasks, each an island of the genetic algorithm of `plugins/tspga`: %d tours of a generated instance (uniform random cities, `city_seed` 1) evolved for %s by tournament selection, order crossover, double-bridge mutation, 2-opt and Or-opt local search, and elitist replacement. Every %d generations an island stores its %d best tours in a job-global variable and takes in its ring neighbour's (Fenech's interbreeding through a synchronized global variable, here held by the job's coordinator); it checkpoints every %v s. The exact specs are ga-<cities>.yaml.",
		cfg.Islands, cfg.Population, gaGensNote(cfg), cfg.MigrateEvery, cfg.Migrants, cfg.CheckpointEvery)
	var views []setupOutView
	if len(sizes) > 0 {
		for _, r := range sizes[0].Setups {
			views = append(views, setupOutView{name: r.Setup.Name, cpu: r.Setup.CPU, pins: r.Together.Pinned})
		}
	}
	pinNote := "pinned to cores so that the capacities on each core add up to at most 0.95 (" + pinsNote(views) + "), as if each core were a machine"
	if !env.Config.Pinned() {
		pinNote = "not pinned to cores (pin: false in the config)"
	}
	md.P("**Peers.** Real `p2pc join` processes, each in its own network namespace (lab mode %s), each held to its capacity by a CFS quota (%s) covering its plugin processes, %s; one slot each, so a peer evolves one island at a time, as Fenech's dedicated peer per virtual thread. The submitter and coordinator (`p2pc run --local-slots 0`) run unthrottled in a namespace of their own. The lab's processes run in a cgroup of the highest CPU weight, so other work on the machine disturbs them less.%s", env.Mode(), env.Machine.Cgroup, pinNote, coreFillNote(cfg.KeepCoresBusy))
	md.P("**Method (Fenech & Vella).** One lab per setup. In it, size by size, every peer runs the size's job alone (R_Mi: the job joined to that peer only, on the core and under the quota it then works with), then the peers run it together (R_H)%s. R_Mi and R_H are measured the same way, on the same job: islands per second over the makespan (first lease issued to last result, report.json)%s; generations per second are that rate times the generations. Each round gives S_H = R_H / R_M1, S_H,max = ΣR_Mi / R_M1 and efficiency = S_H / S_H,max from its own runs; the table gives their medians over the rounds with 95%% bootstrap intervals, and an interval wholly above 100%% is flagged as a measurement problem. Fenech ran one island per peer; here the job has many more islands than any setup has peers and peers pull them, fast ones taking more, as p2pc schedules. The load average was %s at the start of the suite and %s at its end.",
		gaRoundsNote(cfg.Rounds), gaWarmNote(env.Quick), orDash(load[0]), orDash(load[1]))
	var t24, tN []string
	for _, st := range setups {
		t24 = append(t24, pct(gaTailBound(st.CPU, 24, gaWindow)))
		tN = append(tN, pct(gaTailBound(st.CPU, cfg.Islands, gaWindow)))
	}
	tail := fmt.Sprintf("**Tail.** A peer alone is never idle, but together the job ends with its last island, and peers that finish theirs earlier wait, while a slow peer may still hold an island it prefetched (a peer of one slot holds two leases): the *tail bound* is the efficiency that this alone leaves, computed by letting peers of the measured solo rates pull %d equal islands that way. On rates proportional to the quotas it is %s, setup by setup", cfg.Islands, strings.Join(tN, " / "))
	if cfg.Islands > 24 {
		tail += fmt.Sprintf(", and would be %s with 24 islands: that is why the job has %d short islands rather than fewer, longer ones", strings.Join(t24, " / "), cfg.Islands)
	}
	md.P("%s.", tail)
	var rows [][]string
	for _, sz := range sizes {
		gens := float64(cfg.gens(sz.Cities))
		for _, r := range sz.Setups {
			var solo []string
			for _, s := range r.Solo {
				solo = append(solo, f1(s.Rate*gens))
			}
			paper := "–"
			if e, ok := fenechEfficiency[len(r.Setup.CPU)]; ok && sz.Cities == sizes[len(sizes)-1].Cities {
				paper = pct(e)
			}
			rows = append(rows, []string{fmt.Sprint(sz.Cities), r.Setup.Label(), strings.Join(solo, ", "), r.RH.Scale(gens).Format(f1),
				r.SH.Format(f2), f2(r.Speedup.SHMax), f2(quotaSHMax(r.Setup)), "**" + r.EfficiencyText() + "**", pct(gaTail(r, cfg.Islands)), paper, r.MakespanCI.Format(f2), r.WallCI.Format(f2), sharesNote(r.Together.Shares)})
		}
	}
	md.P("Medians over the rounds, [95%% bootstrap CI]; R_Mi alone: medians. T_H is the makespan (first lease to last result); wall the whole command (`p2pc run` start to exit).")
	md.Table([]string{"cities", "setup", "R_Mi alone (generations/s)", "R_H (generations/s)", "S_H", "S_H,max", "S_H,max of the quotas", "efficiency", "tail bound", "Fenech & Vella", "T_H (s)", "wall (s)", "islands per peer"}, rows)
	var rrows [][]string
	for _, sz := range sizes {
		for _, row := range roundRows(sz.Setups) {
			rrows = append(rrows, append([]string{fmt.Sprint(sz.Cities)}, row...))
		}
	}
	md.P("**Rounds.** Each round's efficiency, from that round's own runs: the spread is what one measurement on this shared machine is worth.")
	md.Table([]string{"cities", "setup", "efficiency per round"}, rrows)
	if cfg.Rounds > 1 {
		var nrows [][]string
		for _, sz := range sizes {
			for _, r := range sz.Setups {
				var solo []string
				for _, s := range r.Solo {
					solo = append(solo, fmt.Sprintf("%s: %s", cpuList(s.CPU), pctNaN(gaSpread(s))))
				}
				nrows = append(nrows, []string{fmt.Sprint(sz.Cities), r.Setup.Label(), pctNaN(gaSpread(r.Together)), strings.Join(solo, ", ")})
			}
		}
		md.P("**Noise.** How far each rate's %d rounds lie apart ((max - min) / median): what a single measurement on this shared machine is worth.", cfg.Rounds)
		md.Table([]string{"cities", "setup", "R_H: rounds apart", "R_Mi: rounds apart, per capacity"}, nrows)
	}
	md.P("S_H,max of the quotas is Σc_i / c_1 for capacities c_i: what S_H,max would be if every peer's rate were proportional to its quota. Measured S_H,max far from it means the solo runs were disturbed (a busy machine: see the load average in machine.md) or that fixed costs, not the CPU, limit the rate.")
	if dev := gaQuotaDeviation(sizes); dev > 0.1 {
		res.Note("measured S_H,max deviates from the quotas' Σc_i/c_1 by up to %.0f%%: solo rates were disturbed (busy machine?) or latency-bound; efficiencies are correspondingly uncertain", 100*dev)
	}
	md.P("![speedup vs problem size](speedup.svg)\n\n![efficiency vs problem size](efficiency.svg)")
	md.P("Fenech & Vella report, for their largest problem size, 95.7%% / 94.2%% / 93.0%% on 2 / 3 / 4 machines, and substantial initialization costs that level out as the problem grows; their sizes and machines are not given. Here the fixed costs per island (dispatch, plugin call, instance generation, enrolment) weigh most at the smallest size, where an island takes a fraction of a second.")
	md.P("Files: ga.json (all measurements), ga.csv, speedup.svg, efficiency.svg, ga-<cities>.yaml.")
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return err
	}
	return nil
}

// gaRows adds the headline rows: every setup's efficiency and speedup at
// the largest size, and its efficiency at the smallest.
func gaRows(res *Result, sizes []gaSize) {
	if len(sizes) > 0 {
		last := sizes[len(sizes)-1]
		for _, r := range last.Setups {
			paper := "–"
			if e, ok := fenechEfficiency[len(r.Setup.CPU)]; ok {
				paper = pct(e) + " (largest size)"
			}
			res.Add(r.Setup.Label(), fmt.Sprintf("efficiency at %d cities, median [95%% CI]", last.Cities), r.EfficiencyText(), paper)
			res.Add(r.Setup.Label(), fmt.Sprintf("S_H [95%% CI] (S_H,max) at %d cities", last.Cities), r.SH.Format(f2)+" ("+f2(r.Speedup.SHMax)+")", "")
			res.Add(r.Setup.Label(), fmt.Sprintf("makespan / whole command (s) at %d cities [95%% CI]", last.Cities), r.MakespanCI.Format(f2)+" / "+r.WallCI.Format(f2), "")
		}
		first := sizes[0]
		if first.Cities != last.Cities {
			for _, r := range first.Setups {
				res.Add(r.Setup.Label(), fmt.Sprintf("efficiency at %d cities, median [95%% CI]", first.Cities), r.EfficiencyText(), "")
			}
		}
	}
}

// gaEffYMax is the top of the efficiency chart: 110%, or more if a
// (noisy) efficiency lies above it, so that no point is cut off.
func gaEffYMax(sizes []gaSize) float64 {
	top := 110.0
	for _, sz := range sizes {
		for _, r := range sz.Setups {
			if e := 100 * math.Max(r.Speedup.Efficiency, r.Efficiency.Hi); e+5 > top && !math.IsInf(e, 0) {
				top = 10 * math.Ceil((e+5)/10)
			}
		}
	}
	return top
}

// gaTail is the tail bound of a setup's measured solo rates.
func gaTail(r HeteroResult, islands int) float64 {
	var rates []float64
	for _, s := range r.Solo {
		rates = append(rates, s.Rate)
	}
	return gaTailBound(rates, islands, gaWindow)
}

func gaRoundsNote(rounds int) string {
	if rounds > 1 {
		return fmt.Sprintf("; %d rounds per size, each measuring every peer alone and the setup together once, in an order rotated from round to round (the peers restarted wherever a solo run follows a together run), one size after the other; every run is a job of its own, so that each starts its plugin processes cold, alone and together alike", rounds)
	}
	return ", once"
}

// gaGensNote says how many generations the sizes ran.
func gaGensNote(c gaConfig) string {
	var parts []string
	for _, n := range c.Sizes {
		parts = append(parts, fmt.Sprintf("%d generations at %d cities", c.gens(n), n))
	}
	return strings.Join(parts, ", ")
}

func coreFillNote(on bool) string {
	if on {
		return " During the measurements every core also runs a spinner of the lowest priority (SCHED_IDLE, in a cgroup of the least CPU weight), which runs only when nothing else wants the core: a core whose only peer is throttled would otherwise halt, and on this virtual machine the wake-up at the next quota period comes late, so that a peer alone on its core, as in every solo run, gets less than its quota (a 0.3-core busy loop did 13-20% less work than beside such a spinner), while together peers pinned to one core fill each other's gaps. Without it solo rates came out low and efficiencies above 100%."
	}
	return " No spinner kept the cores busy (keep_cores_busy: false): a core whose only peer is throttled halts, and on a virtual machine the wake-up at the next quota period may come late, so that peers alone on their core, as in every solo run, may get less than their quota and efficiencies come out high."
}

func gaWarmNote(quick bool) string {
	if quick {
		return " (--quick: no warm-up)"
	}
	return fmt.Sprintf(", after a warm-up job on each peer (%d short islands of the largest size; again after the peers are restarted between the together and the solo runs of a B round)", gaWarmIslands)
}

func pctNaN(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return pct(x)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
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
