package bench

import (
	"math"
	"slices"
)

// Stats summarises a sample.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"` // sample standard deviation (n-1)
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarise computes Stats of xs (which it does not modify).
func Summarise(xs []float64) Stats {
	s := Stats{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	sum := 0.0
	for _, x := range sorted {
		sum += x
	}
	s.Mean = sum / float64(len(sorted))
	if len(sorted) > 1 {
		ss := 0.0
		for _, x := range sorted {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(sorted)-1))
	}
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.P50 = Quantile(sorted, 0.50)
	s.P90 = Quantile(sorted, 0.90)
	s.P99 = Quantile(sorted, 0.99)
	return s
}

// Quantile is the q-quantile of sorted values, linearly interpolated
// between closest ranks.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Rolling is the trailing moving average of xs over w points. A NaN
// restarts it (and stays NaN in the output).
func Rolling(xs []float64, w int) []float64 {
	out := make([]float64, len(xs))
	start := 0
	sum := 0.0
	for i, x := range xs {
		if math.IsNaN(x) {
			out[i], sum, start = math.NaN(), 0, i+1
			continue
		}
		sum += x
		if i-start >= w {
			sum -= xs[i-w]
		}
		out[i] = sum / float64(min(i-start+1, w))
	}
	return out
}
