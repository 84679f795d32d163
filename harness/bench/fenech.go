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
}

// Measure is one run of the workload on some peers.
type Measure struct {
	Label string    `json:"label"`
	CPU   []float64 `json:"cpu"`
	Tasks int       `json:"tasks"`
	// Makespan is the first lease to the last result (report.json); Wall
	// the whole `p2pc run` process; Rate is Tasks / Makespan.
	MakespanS float64            `json:"makespan_s"`
	WallS     float64            `json:"wall_s"`
	Rate      float64            `json:"rate_tasks_per_s"`
	Shares    map[string]int     `json:"shares"`
	Throttled map[string]float64 `json:"throttled_s,omitempty"`
}

// HeteroResult is one setup's measurements.
type HeteroResult struct {
	Setup    Setup     `json:"setup"`
	Solo     []Measure `json:"solo"` // per peer, in the setup's order
	Together Measure   `json:"together"`
	Speedup  Speedup   `json:"speedup"`
}

// Heterogeneous measures w as Fenech & Vella did: every peer alone
// (R_Mi), then each setup's peers together (R_H). Each setup gets one lab,
// its peers under their quotas. The peers of a lab do not know each other
// (no mDNS; the submitter is given their addresses), so a job joined to
// one peer runs on that peer alone: each peer is warmed up and measured
// alone first, then the setup together. Peers of equal capacity are the
// same machine: each capacity is measured alone once per run and reused
// across setups. phase, if set, gets a step per measurement.
func (e *Env) Heterogeneous(ctx context.Context, w Workload, phase Phase) ([]HeteroResult, error) {
	if w.Slots == nil {
		w.Slots = func(cpu float64) int { return max(1, int(math.Ceil(cpu))) }
	}
	step := func(what string) {
		if phase != nil {
			phase.Step(what)
		}
	}
	solo := map[string]Measure{}
	var out []HeteroResult
	for _, s := range e.Setups {
		hr, err := e.setup(ctx, w, s, solo, step)
		if err != nil {
			return out, fmt.Errorf("setup %d: %w", s.Name, err)
		}
		out = append(out, hr)
	}
	return out, nil
}

func (e *Env) setup(ctx context.Context, w Workload, s Setup, solo map[string]Measure, step func(string)) (HeteroResult, error) {
	hr := HeteroResult{Setup: s}
	peers := make([]harness.PeerSpec, len(s.CPU))
	for i, c := range s.CPU {
		peers[i] = harness.PeerSpec{Name: fmt.Sprintf("peer%d-%gc", i+1, c), CPU: c, Slots: w.Slots(c)}
	}
	lab, err := e.NewLab(ctx, peers)
	if err != nil {
		return hr, err
	}
	defer lab.Close()
	var rates []float64
	for i, p := range lab.Peers() {
		cpu := s.CPU[i]
		join := []string{p.Addr}
		if w.Warmup != "" {
			if _, err := e.Submit(ctx, lab, w.Warmup, harness.SubmitOptions{Timeout: w.Timeout, Join: join}); err != nil {
				return hr, fmt.Errorf("warm-up of %s: %w", p.Name, err)
			}
		}
		key := strconv.FormatFloat(cpu, 'f', -1, 64)
		m, ok := solo[key]
		if !ok {
			if m, err = e.measure(ctx, lab, w, []float64{cpu}, join, key+" cores alone"); err != nil {
				return hr, err
			}
			solo[key] = m
			step(fmt.Sprintf("%s cores alone: %.2f tasks/s", key, m.Rate))
		}
		hr.Solo = append(hr.Solo, m)
		rates = append(rates, m.Rate)
	}
	m, err := e.measure(ctx, lab, w, s.CPU, nil, s.Label())
	if err != nil {
		return hr, err
	}
	hr.Together = m
	hr.Speedup = Fenech(rates, m.Rate)
	step(fmt.Sprintf("setup %d together: efficiency %.1f%%", s.Name, 100*hr.Speedup.Efficiency))
	if err := lab.CheckLogs(); err != nil {
		return hr, err
	}
	return hr, lab.Close()
}

// Steps is how many measurements Heterogeneous makes for the setups.
func Steps(setups []Setup) int {
	seen := map[float64]bool{}
	n := 0
	for _, s := range setups {
		for _, c := range s.CPU {
			if !seen[c] {
				seen[c] = true
				n++
			}
		}
		n++
	}
	return n
}

// measure runs w once on the lab's peers at join (nil: all of them).
func (e *Env) measure(ctx context.Context, lab *harness.Lab, w Workload, cpus []float64, join []string, label string) (Measure, error) {
	before := lab.Throttled()
	sub, err := e.Submit(ctx, lab, w.Spec, harness.SubmitOptions{Timeout: w.Timeout, Join: join})
	if err != nil {
		return Measure{}, fmt.Errorf("%s: %w", label, err)
	}
	span := SpanOf(sub.Report)
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
