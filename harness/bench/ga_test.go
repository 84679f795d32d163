package bench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchQuickGA: `p2pc bench --quick --suite ga` on one setup, as root;
// it checks the files the suite must write.
func TestBenchQuickGA(t *testing.T) {
	out, _ := quickBench(t, "ga", 4*time.Minute)
	for _, f := range []string{"ga/ga.json", "ga/ga.csv", "ga/speedup.svg", "ga/efficiency.svg", "ga/summary.md", "ga/rows.json", "ga/ga-30.yaml"} {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, fi)
		}
	}
	for _, f := range []string{"ga/speedup.svg", "ga/efficiency.svg"} {
		svg, _ := os.ReadFile(filepath.Join(out, f))
		wellFormed(t, string(svg))
	}
	md, _ := os.ReadFile(filepath.Join(out, "ga", "summary.md"))
	if !strings.Contains(string(md), "tail bound") {
		t.Errorf("summary.md without the tail bound:\n%s", md)
	}
}

func TestGATailBound(t *testing.T) {
	for _, tc := range []struct {
		rates   []float64
		islands int
		window  int
		want    float64
	}{
		{[]float64{2}, 7, 2, 1},          // alone: never idle
		{[]float64{1, 1}, 4, 1, 1},       // 2 + 2
		{[]float64{1, 1}, 3, 1, 0.75},    // 2 + 1: one peer idles half the time
		{[]float64{2, 1}, 3, 1, 1},       // 2 on the fast peer, 1 on the slow
		{[]float64{2, 1}, 4, 2, 4.0 / 6}, // each takes 2 at once: the slow one ends at 2
		{[]float64{1}, 0, 2, math.NaN()},
		{[]float64{1, 0}, 3, 2, math.NaN()},
	} {
		got := gaTailBound(tc.rates, tc.islands, tc.window)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("gaTailBound(%v, %d, %d) = %v, want %v", tc.rates, tc.islands, tc.window, got, tc.want)
		}
	}
	// More, smaller islands shrink the tail on the setups of bench.yaml.
	for _, caps := range [][]float64{{0.9, 0.6}, {0.8, 0.5, 0.4}, {0.6, 0.5, 0.4, 0.3}} {
		if b := gaTailBound(caps, 120, gaWindow); b < 0.95 {
			t.Errorf("tail bound of %v with 120 islands: %v", caps, b)
		}
	}
}

func TestHeteroPlan(t *testing.T) {
	// One job, two rounds: the ABBA order the mandelbrot suite has always
	// used.
	want := []planStep{{0, 0, false}, {1, 0, false}, {-1, 0, false}, {-1, 0, false}, {-1, -1, true}, {1, 0, false}, {0, 0, false}}
	if got := heteroPlan(2, 2, 1); !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	if got := heteroPlan(1, 2, 1); !slices.Equal(got, want[:3]) {
		t.Errorf("one round: %v", got)
	}
	// Several jobs: one after the other, each a palindrome but for the
	// restarts; each measurement appears once per round.
	for _, rounds := range []int{1, 2, 4} {
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
			for _, s := range per {
				if s.job != j {
					t.Fatalf("rounds %d: job %d's block holds %v", rounds, j, s)
				}
			}
			if rounds%2 == 0 {
				rev := slices.Clone(per)
				slices.Reverse(rev)
				if !slices.Equal(per, rev) {
					t.Errorf("rounds %d, job %d: not a palindrome: %v", rounds, j, per)
				}
			}
		}
	}
	// The peers must not know each other when measured alone: no solo step
	// between a together step and the next restart.
	together := false
	for _, s := range slices.Concat(heteroPlan(4, 2, 3), heteroPlan(1, 2, 3)) {
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
