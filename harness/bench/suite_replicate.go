package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
)

func init() { Register(replicateSuite{}) }

// replicateSuite is the cost of a plain run's replication (issue 31): the
// tracker suite's echo job run with its journal copied to two members
// (the default with peers present: once the job has run a second), copied
// from the start, and with --no-replicate, interleaved on one lab.
type replicateSuite struct{}

func (replicateSuite) Info() Info {
	return Info{Name: "replicate", Title: "Cost of a plain run's replication: the tracker job replicated against --no-replicate", Paper: "issue 31", Order: 86, Explicit: true}
}

type replicateConfig struct {
	Tasks  int `yaml:"tasks"`
	Peers  int `yaml:"peers"`
	Slots  int `yaml:"slots"`
	Rounds int `yaml:"rounds"`
	// SleepMS is each echo task's sleep (0: the tracker's job, about
	// 0.6 s in all; 1000: about 5 s, long enough to be placed).
	SleepMS int `yaml:"sleep_ms"`
}

// replicateRun is one measured run.
type replicateRun struct {
	Round     int     `json:"round"`
	Arm       string  `json:"arm"`
	MakespanS float64 `json:"makespan_s"`
	WallS     float64 `json:"wall_s"`
	CPUS      float64 `json:"coordinator_cpu_s"`
	Load      string  `json:"loadavg_before"`
}

func (replicateSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg := replicateConfig{Tasks: 2048, Peers: 16, Slots: 32, Rounds: 6}
	if env.Quick {
		cfg = replicateConfig{Tasks: 256, Peers: 4, Slots: 8, Rounds: 2}
	}
	if err := env.Config.Decode("replicate", env.Quick, &cfg); err != nil {
		return nil, err
	}
	if cfg.Tasks < 1 || cfg.Peers < 3 || cfg.Slots < 1 || cfg.Rounds < 1 || cfg.SleepMS < 0 {
		return nil, fmt.Errorf("replicate: tasks, slots and rounds must be positive and peers at least 3 (two hold the job): %+v", cfg)
	}
	plugin, err := env.Plugin(ctx, "echo")
	if err != nil {
		return nil, err
	}
	spec, err := env.WriteSpec("replicate", JobSpec{Name: "bench-replicate", Plugin: plugin, Params: map[string]any{"sleep_ms": cfg.SleepMS}, Tasks: []any{Range("i", cfg.Tasks)}, Timeout: "1m"})
	if err != nil {
		return nil, err
	}
	phase := env.Progress.Phase("replicate", 1+3*cfg.Rounds)
	defer phase.Done()
	lab, err := env.NewLab(ctx, uniformPeers(cfg.Peers, cfg.Slots))
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	run := func(round int, arm string, args ...string) (replicateRun, error) {
		load := loadavg()
		sub, err := env.Submit(ctx, lab, spec, harness.SubmitOptions{Args: args, SampleCPU: 100 * time.Millisecond})
		if err != nil {
			return replicateRun{}, fmt.Errorf("replicate round %d (%s): %w", round, arm, err)
		}
		r := trackerOf("", sub, 100*time.Millisecond)
		return replicateRun{Round: round, Arm: arm, MakespanS: r.MakespanS, WallS: r.WallS, CPUS: r.CPUS, Load: load}, nil
	}
	// A cold run first, on every peer: the plugin fetched and started.
	if _, err := run(0, "cold", "--min-peers", strconv.Itoa(cfg.Peers), "--no-replicate"); err != nil {
		return nil, err
	}
	phase.Step("cold run")
	// The arms: the default (the journal copied once the job has run a
	// second), copied from the start, and not copied.
	arms := []struct{ name, flag, val string }{
		{"replicated (default)", "", ""},
		{"replicated from the start", "--replicate-after", "0s"},
		{"--no-replicate", "--no-replicate", ""},
	}
	var runs []replicateRun
	walls := make([][]float64, len(arms))
	ratios := make([][]float64, len(arms))
	for i := range cfg.Rounds {
		// The order rotates each round: every arm runs after each other.
		got := make([]float64, len(arms))
		for k := range arms {
			a := (i + k) % len(arms)
			var args []string
			if arms[a].flag != "" {
				args = append(args, arms[a].flag)
			}
			if arms[a].val != "" {
				args = append(args, arms[a].val)
			}
			r, err := run(i+1, arms[a].name, args...)
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
			got[a] = r.WallS
			walls[a] = append(walls[a], r.WallS)
			phase.Step(fmt.Sprintf("round %d, %s: %.2f s", i+1, arms[a].name, r.WallS))
		}
		for a := range arms {
			ratios[a] = append(ratios[a], got[a]/got[len(arms)-1])
		}
	}
	if err := lab.CheckLogs(); err != nil {
		return nil, err
	}
	secs := func(iv Interval) string { return iv.Format(func(x float64) string { return fmt.Sprintf("%.3f s", x) }) }
	ratio := func(iv Interval) string { return iv.Format(func(x float64) string { return fmt.Sprintf("%.3f", x) }) }
	res := &Result{}
	setup := fmt.Sprintf("%d echo tasks of %d ms on %d peers x %d slots", cfg.Tasks, cfg.SleepMS, cfg.Peers, cfg.Slots)
	data := map[string]any{"config": cfg, "runs": runs}
	var sum []string
	for a, arm := range arms {
		w := MedianCI(walls[a])
		res.Add(setup, "wall time, "+arm.name+" (median)", secs(w), "")
		data[arm.name+": wall_s"] = w
		if a < len(arms)-1 {
			r := MedianCI(ratios[a])
			res.Add(setup, arm.name+" / --no-replicate, paired by round (median)", ratio(r), "at most 1.05 (issue 31)")
			data[arm.name+": ratio"] = r
			sum = append(sum, fmt.Sprintf("%s: median wall %s, paired ratio to --no-replicate %s", arm.name, secs(w), ratio(r)))
		} else {
			sum = append(sum, fmt.Sprintf("%s: median wall %s", arm.name, secs(w)))
		}
	}
	if err := env.WriteJSON("data.json", data); err != nil {
		return nil, err
	}
	res.Note("%d interleaved rounds, the order rotated each round, on one lab after a cold run; the whole `p2pc run` command's wall time. The machine may be shared: the load average before each run is in data.json.", cfg.Rounds)
	var md Markdown
	md.P("# Cost of a plain run's replication\n\n%s, %d rounds, the order rotated each round; wall time of the whole `p2pc run`.", setup, cfg.Rounds)
	var rows [][]string
	for _, r := range runs {
		rows = append(rows, []string{strconv.Itoa(r.Round), r.Arm, fmt.Sprintf("%.3f", r.WallS), fmt.Sprintf("%.3f", r.MakespanS), fmt.Sprintf("%.2f", r.CPUS), r.Load})
	}
	md.Table([]string{"round", "arm", "wall s", "makespan s", "coordinator CPU s", "load before"}, rows)
	md.P("%s.", strings.Join(sum, "; "))
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return nil, err
	}
	return res, nil
}
