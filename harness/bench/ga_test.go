package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestGATailBound(t *testing.T) {
	for _, tc := range []struct {
		rates   []float64
		islands int
		window  int
		want    float64
	}{
		{[]float64{2}, 7, 2, 1},            // alone: never idle
		{[]float64{1, 1}, 4, 1, 1},         // 2 + 2
		{[]float64{1, 1}, 3, 1, 0.75},      // 2 + 1: one peer idles half the time
		{[]float64{2, 1}, 3, 1, 1},         // 2 on the fast peer, 1 on the slow
		{[]float64{2, 1}, 4, 2, 4.0 / 4.5}, // no prefetch with 2 left: the fast peer takes 3, ends at 1.5
		{[]float64{2, 1}, 8, 2, 8.0 / 9},   // the slow peer's prefetch ends at 4 left: 6 + 2 after 3 s
		{[]float64{1}, 0, 2, math.NaN()},
		{[]float64{1, 0}, 3, 2, math.NaN()},
	} {
		got := gaTailBound(tc.rates, tc.islands, tc.window)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("gaTailBound(%v, %d, %d) = %v, want %v", tc.rates, tc.islands, tc.window, got, tc.want)
		}
	}
	// The bench's 4-peer setup and 48 islands: 88.9 % while a slow peer
	// prefetched to the end.
	if b := gaTailBound([]float64{0.6, 0.5, 0.4, 0.3}, 48, gaWindow); b < 0.96 {
		t.Errorf("tail bound of the 4-peer setup with 48 islands: %v", b)
	}
	// More, smaller islands shrink the tail on the setups of bench.yaml.
	for _, caps := range [][]float64{{0.9, 0.6}, {0.8, 0.5, 0.4}, {0.6, 0.5, 0.4, 0.3}} {
		if b := gaTailBound(caps, 120, gaWindow); b < 0.95 {
			t.Errorf("tail bound of %v with 120 islands: %v", caps, b)
		}
	}
}

func TestHeteroPlan(t *testing.T) {
	// One job, 2 peers, three rounds: "p0 p1 T" rotated by the round, with
	// a restart wherever a solo run follows a together run.
	R := planStep{-1, -1, true}
	p0, p1, T := planStep{0, 0, false}, planStep{1, 0, false}, planStep{-1, 0, false}
	want := []planStep{p0, p1, T, R, p1, T, R, p0, T, R, p0, p1}
	if got := heteroPlan(3, 2, 1); !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	if got := heteroPlan(1, 2, 1); !slices.Equal(got, want[:3]) {
		t.Errorf("one round: %v", got)
	}
	// Several jobs: one after the other; every round measures each peer
	// and the setup once; over peers+1 rounds each measurement takes each
	// place of a round once.
	for _, rounds := range []int{1, 2, 4, 5} {
		plan := heteroPlan(rounds, 3, 4)
		var meas []planStep
		for _, s := range plan {
			if !s.restart {
				meas = append(meas, s)
			}
		}
		if len(meas) != rounds*(3+1)*4 {
			t.Errorf("rounds %d: %d measurements", rounds, len(meas))
		}
		for j := range 4 {
			per := meas[j*rounds*4 : (j+1)*rounds*4]
			places := map[planStep]map[int]bool{}
			for r := range rounds {
				round := per[r*4 : (r+1)*4]
				seen := map[planStep]bool{}
				for pos, s := range round {
					if s.job != j {
						t.Fatalf("rounds %d: job %d's block holds %v", rounds, j, s)
					}
					if seen[s] {
						t.Fatalf("rounds %d, job %d, round %d: %v twice", rounds, j, r, s)
					}
					seen[s] = true
					if places[s] == nil {
						places[s] = map[int]bool{}
					}
					places[s][pos] = true
				}
			}
			for s, pos := range places {
				if len(pos) != min(rounds, 4) {
					t.Errorf("rounds %d, job %d: %v took places %v", rounds, j, s, pos)
				}
			}
		}
	}
	// The peers must not know each other when measured alone: no solo step
	// between a together step and the next restart.
	together := false
	for _, s := range slices.Concat(heteroPlan(5, 2, 3), heteroPlan(1, 2, 3)) {
		switch {
		case s.restart:
			together = false
		case s.peer < 0:
			together = true
		case together:
			t.Fatalf("solo run %v after a together run without a restart", s)
		}
	}
}

func TestRoundSpeedups(t *testing.T) {
	// Two peers over three rounds; round 2 is disturbed (the together run
	// slow): its efficiency is low, the median ignores it.
	solo := [][]Measure{
		{{Rate: 2}, {Rate: 2}, {Rate: 2}},
		{{Rate: 1}, {Rate: 1}, {Rate: 1}},
	}
	together := []Measure{{Rate: 2.85}, {Rate: 1.5}, {Rate: 2.88}}
	rs := roundSpeedups(solo, together)
	if len(rs) != 3 || math.Abs(rs[0].Efficiency-0.95) > 1e-9 || math.Abs(rs[1].Efficiency-0.5) > 1e-9 {
		t.Fatalf("rounds %+v", rs)
	}
	eff, sh, _ := speedupCIs(rs)
	if math.Abs(eff.Median-0.95) > 1e-9 || eff.Lo > eff.Median || eff.Hi < eff.Median || math.Abs(sh.Median-1.425) > 1e-9 {
		t.Errorf("efficiency %+v, S_H %+v", eff, sh)
	}
	h := HeteroResult{Efficiency: Interval{N: 5, Median: 1.03, Lo: 1.01, Hi: 1.05}}
	if !h.Suspect() || !strings.Contains(h.EfficiencyText(), "measurement problem") {
		t.Errorf("an interval above 100%% is not flagged: %q", h.EfficiencyText())
	}
	h.Efficiency.Lo = 0.99
	if h.Suspect() || strings.Contains(h.EfficiencyText(), "problem") {
		t.Errorf("an interval reaching below 100%% is flagged: %q", h.EfficiencyText())
	}
}

func TestMedianMeasure(t *testing.T) {
	ms := []Measure{{Rate: 1, MakespanS: 10}, {Rate: 5, MakespanS: 2}, {Rate: 2, MakespanS: 5}}
	m := medianMeasure(ms)
	if m.Rate != 2 || m.MakespanS != 5 || len(m.Rounds) != 3 {
		t.Errorf("median of 3: %+v", m)
	}
	m = medianMeasure(ms[:2])
	if m.Rate != 3 || m.MakespanS != 6 {
		t.Errorf("two rounds: their mean, got %+v", m)
	}
	if s := gaSpread(medianMeasure(ms)); math.Abs(s-2) > 1e-12 {
		t.Errorf("spread %v, want (5-1)/2", s)
	}
	if s := gaSpread(ms[0]); !math.IsNaN(s) {
		t.Errorf("spread of one round %v", s)
	}
}
