package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

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
	// Rounds is 1 (default: every peer alone, then the setup together) or
	// 2 (ABBA: then the setup together again and every peer alone again,
	// in reverse order; each rate is the mean of its two measurements, so
	// a drift of the machine's speed during the setup cancels out).
	Rounds int
}

// Steps is how many measurements Heterogeneous makes for the setups.
func (w Workload) Steps(setups []Setup) int {
	n := 0
	for _, s := range setups {
		n += len(s.CPU) + 1
	}
	return n * max(w.Rounds, 1)
}

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
	// fields above are then their means (shares and throttling: the first).
	Rounds []Measure `json:"rounds,omitempty"`
}

// HeteroResult is one setup's measurements.
type HeteroResult struct {
	Setup    Setup     `json:"setup"`
	Solo     []Measure `json:"solo"` // per peer, in the setup's order
	Together Measure   `json:"together"`
	Speedup  Speedup   `json:"speedup"`
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
	if w.Slots == nil {
		w.Slots = func(cpu float64) int { return max(1, int(math.Ceil(cpu))) }
	}
	if w.Rounds < 1 || w.Rounds > 2 {
		w.Rounds = 1
	}
	step := func(what string) {
		if phase != nil {
			phase.Step(what)
		}
	}
	var out []HeteroResult
	for _, s := range e.Setups {
		hr, err := e.setup(ctx, w, s, step)
		if err != nil {
			return out, fmt.Errorf("setup %d: %w", s.Name, err)
		}
		out = append(out, hr)
	}
	return out, nil
}

func (e *Env) setup(ctx context.Context, w Workload, s Setup, step func(string)) (HeteroResult, error) {
	hr := HeteroResult{Setup: s}
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
		return hr, err
	}
	defer lab.Close()
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
		return hr, err
	}
	alone := func(i int) (Measure, error) {
		p := lab.Peers()[i]
		label := fmt.Sprintf("%g cores alone", s.CPU[i])
		m, err := e.measure(ctx, lab, w, []float64{s.CPU[i]}, []string{p.Addr}, label)
		if err != nil {
			return m, err
		}
		if pins != nil {
			m.Pinned = []int{pins[i]}
		}
		step(fmt.Sprintf("setup %d, %s: %.2f tasks/s", s.Name, label, m.Rate))
		return m, nil
	}
	together := func() (Measure, error) {
		m, err := e.measure(ctx, lab, w, s.CPU, nil, s.Label())
		if err != nil {
			return m, err
		}
		m.Pinned = pins
		step(fmt.Sprintf("setup %d together: %.2f tasks/s", s.Name, m.Rate))
		return m, nil
	}

	n := len(s.CPU)
	solo := make([][]Measure, n)
	var all []Measure
	for i := range n { // A: each alone, then together
		m, err := alone(i)
		if err != nil {
			return hr, err
		}
		solo[i] = append(solo[i], m)
	}
	m, err := together()
	if err != nil {
		return hr, err
	}
	all = append(all, m)
	if w.Rounds == 2 { // B: together, then each alone in reverse
		if m, err = together(); err != nil {
			return hr, err
		}
		all = append(all, m)
		// The together runs introduced the peers to each other: restart
		// them, so that a job joined to one runs on that one alone.
		if err := lab.RestartPeers(ctx); err != nil {
			return hr, err
		}
		if err := warmUp(); err != nil {
			return hr, err
		}
		for i := n - 1; i >= 0; i-- {
			m, err := alone(i)
			if err != nil {
				return hr, err
			}
			solo[i] = append(solo[i], m)
		}
	}
	var rates []float64
	for i := range n {
		hr.Solo = append(hr.Solo, meanMeasure(solo[i]))
		rates = append(rates, hr.Solo[i].Rate)
	}
	hr.Together = meanMeasure(all)
	hr.Speedup = Fenech(rates, hr.Together.Rate)
	if err := lab.CheckLogs(); err != nil {
		return hr, err
	}
	return hr, lab.Close()
}

// meanMeasure folds several measurements of one thing into their mean.
func meanMeasure(ms []Measure) Measure {
	if len(ms) == 1 {
		return ms[0]
	}
	out := ms[0]
	out.Rounds = ms
	out.MakespanS, out.WallS, out.Rate = 0, 0, 0
	for _, m := range ms {
		out.MakespanS += m.MakespanS / float64(len(ms))
		out.WallS += m.WallS / float64(len(ms))
		out.Rate += m.Rate / float64(len(ms))
	}
	return out
}

// pinLimit is the most capacity PackCPUs puts on one core: the rest is
// for the coordinator, the peers' own p2pc processes' bursts and the
// system.
const pinLimit = 0.95

// measure runs w once on the lab's peers at join (nil: all of them).
func (e *Env) measure(ctx context.Context, lab *harness.Lab, w Workload, cpus []float64, join []string, label string) (Measure, error) {
	before := lab.Throttled()
	sub, err := e.Submit(ctx, lab, w.Spec, harness.SubmitOptions{Timeout: w.Timeout, Join: join})
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
