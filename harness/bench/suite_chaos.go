package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/harness/chaos"
)

func init() { Register(chaosSuite{}) }

// chaosSuite runs the chaos scenarios (package harness/chaos) --runs
// times each and counts how many survived. It is not a paper's
// experiment: "all" leaves it out; select it with --suite chaos.
type chaosSuite struct{}

func (chaosSuite) Info() Info {
	return Info{Name: "chaos", Title: "Chaos suite: every fault of issue 20, run N times", Paper: "issue 20", Order: 90, Explicit: true}
}

// chaosRun is one run of one scenario (runs.json, runs.csv).
type chaosRun struct {
	Scenario string   `json:"scenario"`
	Run      int      `json:"run"`
	Survived bool     `json:"survived"`
	Error    string   `json:"error,omitempty"`
	Exit     int      `json:"exit"`
	JobS     float64  `json:"job_s"`
	RecoverS float64  `json:"recover_s"`
	Lost     int      `json:"lost"`
	Load1    string   `json:"loadavg_before"`
	TookS    float64  `json:"took_s"`
	Notes    []string `json:"notes,omitempty"`
}

// chaosConfig is the suite's section of bench.yaml.
type chaosConfig struct {
	Runs    int    `yaml:"runs"`
	Timeout string `yaml:"timeout"`
}

func (chaosSuite) Run(ctx context.Context, env *Env) (*Result, error) {
	cfg := chaosConfig{Runs: 1, Timeout: "3m"}
	if err := env.Config.Decode("chaos", env.Quick, &cfg); err != nil {
		return nil, err
	}
	limit, err := time.ParseDuration(cfg.Timeout)
	if err != nil || limit <= 0 {
		return nil, fmt.Errorf("bench config: chaos timeout %q: want a duration like 3m", cfg.Timeout)
	}
	runs := max(cfg.Runs, 1)
	if env.Runs > 0 {
		runs = env.Runs
	}
	scenarios := chaos.Scenarios()
	ce := &chaos.Env{Bin: env.Bin, Root: env.Root, Dir: env.WorkDir, Data: env.shared.submitData, Logger: env.Log}
	ph := env.Progress.Phase("chaos", runs*len(scenarios))
	defer ph.Done()
	var all []chaosRun
	for _, s := range scenarios {
		for i := range runs {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			load := loadavg()
			sctx, cancel := context.WithTimeout(ctx, limit)
			start := time.Now()
			out, err := ce.Run(sctx, s)
			cancel()
			r := chaosRun{Scenario: s.Name, Run: i + 1, Survived: err == nil, Load1: load, TookS: time.Since(start).Seconds()}
			if err != nil {
				r.Error = err.Error()
			}
			if out != nil {
				r.Exit, r.JobS, r.RecoverS, r.Lost, r.Notes = out.Exit, out.Wall.Seconds(), out.Recover.Seconds(), out.Lost, out.Notes
			}
			all = append(all, r)
			what := "survived"
			if err != nil {
				what = "FAILED: " + firstLine(r.Error)
			}
			ph.Step(fmt.Sprintf("%s run %d: %s", s.Name, i+1, what))
		}
	}
	return writeChaos(env, scenarios, all, runs)
}

func writeChaos(env *Env, scenarios []chaos.Scenario, all []chaosRun, runs int) (*Result, error) {
	res := &Result{}
	if err := env.WriteJSON("runs.json", all); err != nil {
		return nil, err
	}
	var csvRows [][]string
	for _, r := range all {
		csvRows = append(csvRows, []string{r.Scenario, strconv.Itoa(r.Run), strconv.FormatBool(r.Survived), strconv.Itoa(r.Exit),
			f3(r.JobS), f3(r.RecoverS), strconv.Itoa(r.Lost), r.Load1, f1(r.TookS), firstLine(r.Error)})
	}
	if err := env.WriteCSV("runs.csv", []string{"scenario", "run", "survived", "exit", "job_s", "recover_s", "lost", "loadavg_before", "took_s", "error"}, csvRows); err != nil {
		return nil, err
	}
	var md Markdown
	md.P("# Chaos suite")
	md.P("Each scenario of package `harness/chaos` run %d time(s) on real `p2pc` processes in a lab (network namespaces on a bridge). "+
		"A run **survived** when every assertion of the scenario held: the job ended as it must (completed, or failed with the right exit code and reason, in bounded time), "+
		"outputs equal a clean run's where it completes, no task was accepted twice, the report is consistent, and nothing the lab started was left running. "+
		"*recover* is the scenario's own measure of recovery (see below; runs where it was not measured are left out, – if none), *lost* the attempts that did not give the accepted answer. "+
		"Written by `p2pc bench --suite chaos --runs %d`; raw rows in runs.csv and runs.json, the machine (with its load at start and end) in ../machine.md.", runs, runs)
	var rows [][]string
	for _, s := range scenarios {
		var rec, jobs []float64
		survived, lostSum := 0, 0
		var loads []string
		for _, r := range all {
			if r.Scenario != s.Name {
				continue
			}
			if r.Survived {
				survived++
			}
			if r.RecoverS > 0 { // 0: not measured in that run
				rec = append(rec, r.RecoverS)
			}
			jobs = append(jobs, r.JobS)
			lostSum += r.Lost
			loads = append(loads, r.Load1)
		}
		n := len(jobs)
		if n == 0 {
			continue
		}
		slices.Sort(rec)
		slices.Sort(jobs)
		recMed, recMax := "–", "–"
		if len(rec) > 0 {
			recMed, recMax = f2(rec[len(rec)/2])+" s", f2(rec[len(rec)-1])+" s"
		}
		rows = append(rows, []string{s.Name, strconv.Itoa(n), fmt.Sprintf("%d/%d", survived, n),
			recMed, recMax, f1(float64(lostSum) / float64(n)), f1(jobs[n/2]) + " s", loads[0] + " … " + loads[n-1]})
		res.Add(s.Name, "survived", fmt.Sprintf("%d/%d", survived, n), "")
		res.Add(s.Name, "time to recover, median", recMed, "")
	}
	md.Table([]string{"scenario", "runs", "survived", "recover (median)", "recover (max)", "lost work (mean attempts)", "job (median)", "load avg before (first … last run)"}, rows)
	var failed [][]string
	for _, r := range all {
		if !r.Survived {
			failed = append(failed, []string{r.Scenario, strconv.Itoa(r.Run), firstLine(r.Error)})
		}
	}
	if len(failed) > 0 {
		md.P("## Failed runs")
		md.Table([]string{"scenario", "run", "error"}, failed)
	}
	md.P("## Scenarios")
	for _, s := range scenarios {
		md.P("**%s.** %s", s.Name, s.Doc)
	}
	if err := env.WriteMarkdown("summary.md", &md); err != nil {
		return nil, err
	}
	res.Note("%d run(s) per scenario; survived = every assertion held (see chaos/summary.md)", runs)
	return res, nil
}
