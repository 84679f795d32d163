package bench

import (
	"encoding/json"
	"math"
	"testing"
)

func TestMedianCI(t *testing.T) {
	for _, c := range []struct {
		name           string
		xs             []float64
		median, lo, hi float64 // NaN: not checked beyond the bounds below
		minLo, maxHi   float64
	}{
		{name: "empty", xs: nil, median: math.NaN(), lo: math.NaN(), hi: math.NaN()},
		{name: "one value", xs: []float64{4}, median: 4, lo: 4, hi: 4},
		{name: "constant", xs: []float64{2, 2, 2, 2, 2}, median: 2, lo: 2, hi: 2},
		{name: "NaNs left out", xs: []float64{math.NaN(), 3, math.NaN()}, median: 3, lo: 3, hi: 3},
		// Five rounds 1..5: the resampled medians of five values spread
		// over [1, 5], but 1 and 5 are each a median in only ~6% of the
		// resamples: the 95% interval is [2, 4] or wider, within [1, 5].
		{name: "five rounds", xs: []float64{5, 1, 4, 2, 3}, median: 3, lo: math.NaN(), hi: math.NaN(), minLo: 1, maxHi: 5},
		// One outlier moves the median's interval little.
		{name: "an outlier", xs: []float64{1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 9}, median: 1.00, lo: math.NaN(), hi: math.NaN(), minLo: 0.98, maxHi: 1.02},
	} {
		t.Run(c.name, func(t *testing.T) {
			iv := MedianCI(c.xs)
			same := func(got, want float64) bool {
				return math.IsNaN(want) && math.IsNaN(got) || math.Abs(got-want) < 1e-12
			}
			if !same(iv.Median, c.median) {
				t.Errorf("median %v, want %v", iv.Median, c.median)
			}
			if !math.IsNaN(c.lo) || len(c.xs) == 0 {
				if !same(iv.Lo, c.lo) || !same(iv.Hi, c.hi) {
					t.Errorf("interval [%v, %v], want [%v, %v]", iv.Lo, iv.Hi, c.lo, c.hi)
				}
				return
			}
			if iv.Lo < c.minLo || iv.Hi > c.maxHi || iv.Lo > iv.Median || iv.Hi < iv.Median {
				t.Errorf("interval [%v, %v] around %v, want within [%v, %v]", iv.Lo, iv.Hi, iv.Median, c.minLo, c.maxHi)
			}
			if iv.Lo == iv.Hi {
				t.Errorf("a spread sample got an empty interval [%v, %v]", iv.Lo, iv.Hi)
			}
		})
	}
}

func TestMedianCIDeterministic(t *testing.T) {
	xs := []float64{0.97, 1.01, 0.95, 0.99, 1.03, 0.96}
	a, b := MedianCI(xs), MedianCI(xs)
	if a.Lo != b.Lo || a.Hi != b.Hi {
		t.Errorf("two calls differ: %+v %+v", a, b)
	}
}

func TestIntervalFormat(t *testing.T) {
	iv := Interval{N: 5, Median: 0.981, Lo: 0.96, Hi: 0.997}
	for _, c := range []struct{ got, want string }{
		{iv.Pct(), "98.1% [96.0, 99.7]"},
		{iv.Format(f2), "0.98 [0.96, 1.00]"},
		{Interval{}.Format(f2), "–"},
		{Interval{}.Pct(), "–"},
		{iv.Scale(100).Format(f1), "98.1 [96.0, 99.7]"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, c := range []struct {
		iv   Interval
		want bool
	}{
		{Interval{N: 5, Median: 1.02, Lo: 1.01, Hi: 1.03}, true},
		{Interval{N: 5, Median: 1.02, Lo: 0.99, Hi: 1.03}, false},
		{Interval{}, false},
	} {
		if got := c.iv.Above(1); got != c.want {
			t.Errorf("%+v above 1: %v, want %v", c.iv, got, c.want)
		}
	}
}

func TestIntervalJSON(t *testing.T) {
	b, err := json.Marshal(MedianCI(nil))
	if err != nil || string(b) != `{"n":0,"median":null,"lo":null,"hi":null}` {
		t.Errorf("empty interval: %s %v", b, err)
	}
	b, err = json.Marshal(struct{ X Float }{Float(math.Inf(1))})
	if err != nil || string(b) != `{"X":null}` {
		t.Errorf("infinity: %s %v", b, err)
	}
	b, err = json.Marshal(Interval{N: 1, Median: 2, Lo: 2, Hi: 2, Samples: []float64{2}})
	if err != nil || string(b) != `{"n":1,"median":2,"lo":2,"hi":2,"samples":[2]}` {
		t.Errorf("one sample: %s %v", b, err)
	}
}
