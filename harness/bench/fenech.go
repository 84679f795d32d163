package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/p2pc/p2pc/harness"
)

// Speedup holds Fenech & Vella's figures for a heterogeneous system
// (after Donaldson et al.): with R_Mi the processing rate of machine i
// alone and R_H that of all of them together,
//
//	S_H = R_H / R_M1    S_H,max = sum(R_Mi) / R_M1    efficiency = S_H / S_H,max
//
// where M1 is the fastest machine.
type Speedup struct {
	RM1        float64 `json:"r_m1"`
	SumRM      float64 `json:"sum_r_mi"`
	RH         float64 `json:"r_h"`
	SH         float64 `json:"s_h"`
	SHMax      float64 `json:"s_h_max"`
	Efficiency float64 `json:"efficiency"`
}

// Fenech computes the speedup figures from the solo rates and the rate
// of the whole setup.
func Fenech(solo []float64, together float64) Speedup {
	s := Speedup{RH: together}
	for _, r := range solo {
		s.SumRM += r
		s.RM1 = math.Max(s.RM1, r)
	}
	if s.RM1 > 0 {
		s.SH = together / s.RM1
		s.SHMax = s.SumRM / s.RM1
	}
	if s.SHMax > 0 {
		s.Efficiency = s.SH / s.SHMax
	}
	return s
}

// Workload is a job measured on heterogeneous setups.
type Workload struct {
	// Spec is the measured job's spec; Warmup, if set, a job run first in
	// every lab so that peers hold the plugin and warm plugin processes
	// before the measurement.
	Spec, Warmup string
	// Slots gives a peer of capacity cpu its slots (default: ceil(cpu)).
	Slots func(cpu float64) int
	// Timeout bounds each run (default 30 minutes).
	Timeout time.Duration
	// Rounds is how many times every peer is measured alone and the
	// setup together (default 1), in rotated orders (see heteroPlan).
	// Every round gives an efficiency of its own; the headline figures are
	// the rounds' medians with 95 % bootstrap intervals (MedianCI), so
	// the suites measure at least 5 rounds.
	Rounds int
	// KeepCoresBusy runs an idle-priority spinner on every core while the
	// setup is measured (see coreFiller), so that a throttled peer's core
	// never halts, alone or together.
	KeepCoresBusy bool
}

// Steps is how many measurements Heterogeneous makes for the setups.
func (w Workload) Steps(setups []Setup) int {
	n := 0
	for _, s := range setups {
		n += len(s.CPU) + 1
	}
	return n * max(w.Rounds, 1)
}

// StepsOf is how many measurements HeterogeneousJobs makes for the
// setups with jobs jobs.
func (w Workload) StepsOf(setups []Setup, jobs int) int { return w.Steps(setups) * jobs }

// Steps is how many measurements Heterogeneous makes for the setups with
// one round.
func Steps(setups []Setup) int { return Workload{}.Steps(setups) }

// Measure is one run of the workload on some peers (or, with two rounds,
// the mean of two).
type Measure struct {
	Label string    `json:"label"`
	CPU   []float64 `json:"cpu"`
	// Pinned: the CPU each peer was pinned to (nil: not pinned).
	Pinned []int `json:"pinned_cpu,omitempty"`
	Tasks  int   `json:"tasks"`
	// Makespan is the first lease to the last result (report.json); Wall
	// the whole `p2pc run` process; Rate is Tasks / Makespan.
	MakespanS float64            `json:"makespan_s"`
	WallS     float64            `json:"wall_s"`
	Rate      float64            `json:"rate_tasks_per_s"`
	Shares    map[string]int     `json:"shares"`
	Throttled map[string]float64 `json:"throttled_s,omitempty"`
	// Rounds holds each round's measurement when there were several; the
	// fields above are then their medians (the means of two; shares and
	// throttling: the first round's).
	Rounds []Measure `json:"rounds,omitempty"`
}

// HeteroResult is one setup's measurements.
type HeteroResult struct {
	Setup    Setup     `json:"setup"`
	Solo     []Measure `json:"solo"` // per peer, in the setup's order
	Together Measure   `json:"together"`
	// Speedup is computed from the median rates.
	Speedup Speedup `json:"speedup"`
	// Rounds are each round's figures, from that round's own solo and
	// together runs; Efficiency, SH and RH their medians with 95 %
	// intervals: the headline figures.
	Rounds     []Speedup `json:"rounds,omitempty"`
	Efficiency Interval  `json:"efficiency_ci"`
	SH         Interval  `json:"s_h_ci"`
	RH         Interval  `json:"r_h_ci"`
	// MakespanCI is the together runs' makespans, WallCI their whole
	// commands (p2pc run start to exit).
	MakespanCI Interval `json:"makespan_ci"`
	WallCI     Interval `json:"wall_ci"`
}

// Suspect says whether the efficiency's whole interval lies above 100 %:
// not a result but a measurement problem.
func (h HeteroResult) Suspect() bool { return h.Efficiency.Above(1) }

// EfficiencyText is the efficiency "median [lo, hi]", flagged when its
// interval lies above 100 %.
func (h HeteroResult) EfficiencyText() string {
	if h.Suspect() {
		return h.Efficiency.Pct() + " ⚠ above 100%: measurement problem"
	}
	return h.Efficiency.Pct()
}

// Heterogeneous measures w as Fenech & Vella did: every peer alone
// (R_Mi), then each setup's peers together (R_H). Each setup gets one lab
// with its peers under their quotas and, unless the config says otherwise,
// pinned to cores (PackCPUs). The peers of a lab do not know each other
// (no mDNS; the submitter is given their addresses), so a job joined to
// one peer runs on that peer alone: each peer is warmed up and measured
// alone in the very lab, on the very core, where it then works with the
// others. phase, if set, gets a step per measurement.
func (e *Env) Heterogeneous(ctx context.Context, w Workload, phase Phase) ([]HeteroResult, error) {
	runs, err := e.HeterogeneousJobs(ctx, w, []string{w.Spec}, phase)
	var out []HeteroResult
	for _, r := range runs {
		out = append(out, r[0])
	}
	return out, err
}

// HeterogeneousJobs is Heterogeneous for several jobs (w.Spec is ignored;
// the specs share w's warm-up, slots, timeout and rounds), measured in one
// lab per setup, one job after the other, each in its own ABBA... sequence
// (see heteroPlan). The result is indexed [setup][job]; on an error, the
// setups measured so far.
func (e *Env) HeterogeneousJobs(ctx context.Context, w Workload, specs []string, phase Phase) ([][]HeteroResult, error) {
	if w.Slots == nil {
		w.Slots = func(cpu float64) int { return max(1, int(math.Ceil(cpu))) }
	}
	if w.Rounds < 1 {
		w.Rounds = 1
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("heterogeneous: no jobs")
	}
	step := func(what string) {
		if phase != nil {
			phase.Step(what)
		}
	}
	var out [][]HeteroResult
	for _, s := range e.Setups {
		hr, err := e.setup(ctx, w, specs, s, step)
		if err != nil {
			return out, fmt.Errorf("setup %d: %w", s.Name, err)
		}
		out = append(out, hr)
	}
	return out, nil
}

func (e *Env) setup(ctx context.Context, w Workload, specs []string, s Setup, step func(string)) ([]HeteroResult, error) {
	var pins []int
	if e.Config.Pinned() {
		var ok bool
		if pins, ok = PackCPUs(s.CPU, e.Machine.Cores, pinLimit); !ok {
			pins = nil
			e.Progress.Printf("setup %d: the capacities do not pack onto %d cores at <= %.2f each: peers not pinned", s.Name, e.Machine.Cores, pinLimit)
		}
	}
	peers := make([]harness.PeerSpec, len(s.CPU))
	for i, c := range s.CPU {
		peers[i] = harness.PeerSpec{Name: fmt.Sprintf("peer%d-%gc", i+1, c), CPU: c, Slots: w.Slots(c)}
		if pins != nil {
			peers[i].CPUs = strconv.Itoa(pins[i])
		}
	}
	lab, err := e.NewLab(ctx, peers)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	if w.KeepCoresBusy {
		cores := make([]int, e.Machine.Cores)
		for i := range cores {
			cores[i] = i
		}
		f, err := startCoreFiller(cores)
		if err != nil {
			return nil, err
		}
		defer f.stop()
	}
	warmUp := func() error {
		if w.Warmup == "" {
			return nil
		}
		for _, p := range lab.Peers() {
			if _, err := e.Submit(ctx, lab, w.Warmup, harness.SubmitOptions{Timeout: w.Timeout, Join: []string{p.Addr}}); err != nil {
				return fmt.Errorf("warm-up of %s: %w", p.Name, err)
			}
		}
		return nil
	}
	if err := warmUp(); err != nil {
		return nil, err
	}
	jobLabel := func(j int) string {
		if len(specs) == 1 {
			return ""
		}
		return fmt.Sprintf(" (job %d of %d)", j+1, len(specs))
	}
	alone := func(i, j int) (Measure, error) {
		p := lab.Peers()[i]
		label := fmt.Sprintf("%g cores alone", s.CPU[i])
		m, err := e.measure(ctx, lab, w, specs[j], []float64{s.CPU[i]}, []string{p.Addr}, label+jobLabel(j))
		if err != nil {
			return m, err
		}
		m.Label = label
		if pins != nil {
			m.Pinned = []int{pins[i]}
		}
		step(fmt.Sprintf("setup %d, %s%s: %.2f tasks/s", s.Name, label, jobLabel(j), m.Rate))
		return m, nil
	}
	together := func(j int) (Measure, error) {
		m, err := e.measure(ctx, lab, w, specs[j], s.CPU, nil, s.Label()+jobLabel(j))
		if err != nil {
			return m, err
		}
		m.Label = s.Label()
		m.Pinned = pins
		step(fmt.Sprintf("setup %d together%s: %.2f tasks/s", s.Name, jobLabel(j), m.Rate))
		return m, nil
	}

	n, k := len(s.CPU), len(specs)
	solo := make([][][]Measure, k) // [job][peer][round]
	all := make([][]Measure, k)    // [job][round]
	for j := range k {
		solo[j] = make([][]Measure, n)
	}
	for _, st := range heteroPlan(w.Rounds, n, k) {
		switch {
		case st.restart:
			// The together runs introduced the peers to each other:
			// restart them, so that a job joined to one runs on that one
			// alone.
			if err := lab.RestartPeers(ctx); err != nil {
				return nil, err
			}
			if err := warmUp(); err != nil {
				return nil, err
			}
		case st.peer < 0:
			m, err := together(st.job)
			if err != nil {
				return nil, err
			}
			all[st.job] = append(all[st.job], m)
		default:
			m, err := alone(st.peer, st.job)
			if err != nil {
				return nil, err
			}
			solo[st.job][st.peer] = append(solo[st.job][st.peer], m)
		}
	}
	out := make([]HeteroResult, k)
	for j := range k {
		hr := HeteroResult{Setup: s}
		var rates []float64
		for i := range n {
			hr.Solo = append(hr.Solo, medianMeasure(solo[j][i]))
			rates = append(rates, hr.Solo[i].Rate)
		}
		hr.Together = medianMeasure(all[j])
		hr.Speedup = Fenech(rates, hr.Together.Rate)
		hr.Rounds = roundSpeedups(solo[j], all[j])
		hr.Efficiency, hr.SH, hr.RH = speedupCIs(hr.Rounds)
		var mk, wall []float64
		for _, m := range all[j] {
			mk, wall = append(mk, m.MakespanS), append(wall, m.WallS)
		}
		hr.MakespanCI, hr.WallCI = MedianCI(mk), MedianCI(wall)
		out[j] = hr
	}
	if err := lab.CheckLogs(); err != nil {
		return out, err
	}
	return out, lab.Close()
}

// planStep is one step of a setup's measurements: job alone on peer,
// job together (peer -1), or a restart of the peers.
type planStep struct {
	peer, job int
	restart   bool
}

// heteroPlan orders a setup's measurements of jobs jobs on peers peers,
// one job after the other. For a job, every round measures each peer
// alone and the peers together once, so that a round's solo rates and its
// swarm rate are taken close together in time under the same conditions
// and give that round's efficiency. Round r is the order "peer 1 ... peer
// n, together" rotated left by r: over n+1 rounds every measurement takes
// every place of a round once, so that a drift of the shared machine or a
// state left by the previous run (a warm cache, a busy coordinator) falls
// on solo and swarm runs alike. Whenever a solo run would follow a
// together run, the peers are restarted first (a restart is no
// measurement): the together run introduced them to each other.
func heteroPlan(rounds, peers, jobs int) []planStep {
	var plan []planStep
	introduced := false
	add := func(st planStep) {
		switch {
		case st.peer < 0:
			introduced = true
		case introduced:
			plan = append(plan, planStep{peer: -1, job: -1, restart: true})
			introduced = false
		}
		plan = append(plan, st)
	}
	for j := range jobs {
		a := make([]planStep, 0, peers+1)
		for i := range peers {
			a = append(a, planStep{peer: i, job: j})
		}
		a = append(a, planStep{peer: -1, job: j})
		for r := range max(rounds, 1) {
			k := r % len(a)
			for _, st := range slices.Concat(a[k:], a[:k]) {
				add(st)
			}
		}
	}
	return plan
}

// roundSpeedups computes each round's Fenech figures from that round's own
// runs: solo[peer][round] and together[round].
func roundSpeedups(solo [][]Measure, together []Measure) []Speedup {
	var out []Speedup
	for r := range together {
		rates := make([]float64, len(solo))
		for i := range solo {
			if r >= len(solo[i]) {
				return out
			}
			rates[i] = solo[i][r].Rate
		}
		out = append(out, Fenech(rates, together[r].Rate))
	}
	return out
}

// speedupCIs are the medians and 95 % intervals of the rounds' figures.
func speedupCIs(rounds []Speedup) (eff, sh, rh Interval) {
	var e, s, r []float64
	for _, x := range rounds {
		e, s, r = append(e, x.Efficiency), append(s, x.SH), append(r, x.RH)
	}
	return MedianCI(e), MedianCI(s), MedianCI(r)
}

// medianMeasure folds several measurements of one thing into their
// medians (the mean of two).
func medianMeasure(ms []Measure) Measure {
	if len(ms) == 1 {
		return ms[0]
	}
	out := ms[0]
	out.Rounds = ms
	med := func(f func(Measure) float64) float64 {
		xs := make([]float64, len(ms))
		for i, m := range ms {
			xs[i] = f(m)
		}
		slices.Sort(xs)
		return Quantile(xs, 0.5)
	}
	out.MakespanS = med(func(m Measure) float64 { return m.MakespanS })
	out.WallS = med(func(m Measure) float64 { return m.WallS })
	out.Rate = med(func(m Measure) float64 { return m.Rate })
	return out
}

// pinLimit is the most capacity PackCPUs puts on one core: the rest is
// for the coordinator, the peers' own p2pc processes' bursts and the
// system.
const pinLimit = 0.95

// measure runs spec once on the lab's peers at join (nil: all of them).
func (e *Env) measure(ctx context.Context, lab *harness.Lab, w Workload, spec string, cpus []float64, join []string, label string) (Measure, error) {
	before := lab.Throttled()
	// Every measurement is a job of its own (the spec's name with a
	// sequence number): peers keep a finished job's plugin processes warm
	// for a while (p2pc join's job linger), so a rerun of the same job
	// would find them warm after some runs and cold after others (after a
	// restart, or a long solo run elsewhere) -- the solo and swarm rates
	// would then count the plugin start on one side and not on the other.
	// As its own job every run starts its plugin processes cold, solo and
	// together alike, as a user's new job does.
	spec, err := e.freshJob(spec)
	if err != nil {
		return Measure{}, fmt.Errorf("%s: %w", label, err)
	}
	sub, err := e.Submit(ctx, lab, spec, harness.SubmitOptions{Timeout: w.Timeout, Join: join})
	if err != nil {
		return Measure{}, fmt.Errorf("%s: %w", label, err)
	}
	span := SpanOf(sub.Report)
	if len(join) == 1 {
		if sh := Shares(sub.Report); len(sh) != 1 {
			return Measure{}, fmt.Errorf("%s: a job joined to one peer ran on %v: the lab's peers know each other", label, sh)
		}
	}
	m := Measure{
		Label:     label,
		CPU:       cpus,
		Tasks:     span.Tasks,
		MakespanS: span.Makespan().Seconds(),
		WallS:     sub.Wall.Seconds(),
		Rate:      span.Rate(),
		Shares:    Shares(sub.Report),
		Throttled: map[string]float64{},
	}
	for name, d := range lab.Throttled() {
		if dd := (d - before[name]).Seconds(); dd > 0 {
			m.Throttled[name] = dd
		}
	}
	e.Log.Info("measured", "component", "bench", "what", label, "tasks", m.Tasks, "makespan_s", m.MakespanS, "rate", m.Rate, "shares", m.Shares)
	return m, nil
}

// freshJob writes a copy of the spec at path whose job name carries a
// new sequence number, so that it is a job of its own (a new job ID) with
// the same work, and returns its path.
func (e *Env) freshJob(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("fresh job: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("fresh job %s: %w", path, err)
	}
	n := e.shared.seq.Add(1)
	m["name"] = fmt.Sprintf("%v-m%d", m["name"], n)
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("fresh job %s: %w", path, err)
	}
	fresh := strings.TrimSuffix(path, ".yaml") + fmt.Sprintf("-m%d.yaml", n)
	if err := os.WriteFile(fresh, out, 0o644); err != nil {
		return "", fmt.Errorf("fresh job: %w", err)
	}
	return fresh, nil
}
