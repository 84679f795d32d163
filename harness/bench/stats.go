package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
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

// Interval is a sample's median with a 95 % confidence interval for it
// (bootstrap percentile; see MedianCI).
type Interval struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	// Samples are the measurements it was computed from, in the order
	// they were taken.
	Samples []float64 `json:"samples,omitempty"`
}

// MarshalJSON writes NaN bounds (no samples) as null: JSON has no NaN.
func (iv Interval) MarshalJSON() ([]byte, error) {
	type plain struct {
		N       int       `json:"n"`
		Median  Float     `json:"median"`
		Lo      Float     `json:"lo"`
		Hi      Float     `json:"hi"`
		Samples []float64 `json:"samples,omitempty"`
	}
	return json.Marshal(plain{N: iv.N, Median: Float(iv.Median), Lo: Float(iv.Lo), Hi: Float(iv.Hi), Samples: iv.Samples})
}

// Float is a float64 that marshals NaN and infinities as JSON null.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// bootstrapResamples is how many resamples MedianCI draws: enough that
// the 2.5 and 97.5 percentiles of the resampled medians are stable to a
// few tenths of a percent of the sample's spread.
const bootstrapResamples = 4000

// MedianCI is the median of xs with a 95 % bootstrap percentile
// confidence interval: xs is resampled with replacement
// bootstrapResamples times, and the interval is the 2.5th and 97.5th
// percentiles of the resamples' medians. The generator has a fixed seed,
// so a sample always gets the same interval. NaNs are left out; with no
// value left every field but N is NaN, with one the interval is that
// value. With fewer than 5 values the interval is too optimistic to mean
// much: the suites measure at least 5 rounds.
func MedianCI(xs []float64) Interval {
	var clean []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			clean = append(clean, x)
		}
	}
	iv := Interval{N: len(clean), Samples: clean}
	if len(clean) == 0 {
		iv.Median, iv.Lo, iv.Hi = math.NaN(), math.NaN(), math.NaN()
		return iv
	}
	sorted := slices.Clone(clean)
	slices.Sort(sorted)
	iv.Median = Quantile(sorted, 0.5)
	if len(sorted) == 1 {
		iv.Lo, iv.Hi = sorted[0], sorted[0]
		return iv
	}
	rng := rand.New(rand.NewPCG(0x9e3779b97f4a7c15, uint64(len(sorted))))
	meds := make([]float64, bootstrapResamples)
	re := make([]float64, len(sorted))
	for i := range meds {
		for j := range re {
			re[j] = sorted[rng.IntN(len(sorted))]
		}
		slices.Sort(re)
		meds[i] = Quantile(re, 0.5)
	}
	slices.Sort(meds)
	iv.Lo, iv.Hi = Quantile(meds, 0.025), Quantile(meds, 0.975)
	return iv
}

// Format writes the interval as "median [lo, hi]" with f formatting each
// number ("–" without values).
func (iv Interval) Format(f func(float64) string) string {
	if iv.N == 0 || math.IsNaN(iv.Median) {
		return "–"
	}
	return f(iv.Median) + " [" + f(iv.Lo) + ", " + f(iv.Hi) + "]"
}

// Pct formats a ratio interval in per cent: "98.1% [96.0, 99.7]".
func (iv Interval) Pct() string {
	if iv.N == 0 || math.IsNaN(iv.Median) {
		return "–"
	}
	p := func(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) }
	return p(iv.Median) + "% [" + p(iv.Lo) + ", " + p(iv.Hi) + "]"
}

// Above says whether the whole interval lies above x.
func (iv Interval) Above(x float64) bool { return iv.N > 0 && iv.Lo > x }

// Scale multiplies the median and the bounds by k (samples too).
func (iv Interval) Scale(k float64) Interval {
	out := iv
	out.Median, out.Lo, out.Hi = k*iv.Median, k*iv.Lo, k*iv.Hi
	out.Samples = make([]float64, len(iv.Samples))
	for i, x := range iv.Samples {
		out.Samples[i] = k * x
	}
	return out
}
