package main

import (
	"context"
	"math"
	"slices"
	"testing"
)

// heldKarp returns the length of an optimal tour by dynamic programming
// over subsets (Held and Karp 1962): O(2^n n²), fine up to ~16 cities.
func heldKarp(in *Instance) int64 {
	n := in.N()
	m := n - 1 // cities 1..n-1; city 0 is the start
	const inf = math.MaxInt64 / 4
	dp := make([]int64, (1<<m)*m)
	for i := range dp {
		dp[i] = inf
	}
	for j := range m {
		dp[(1<<j)*m+j] = int64(in.D(0, int32(j+1)))
	}
	for mask := 1; mask < 1<<m; mask++ {
		for j := range m {
			cur := dp[mask*m+j]
			if cur == inf || mask&(1<<j) == 0 {
				continue
			}
			for k := range m {
				if mask&(1<<k) != 0 {
					continue
				}
				next := mask | 1<<k
				if v := cur + int64(in.D(int32(j+1), int32(k+1))); v < dp[next*m+k] {
					dp[next*m+k] = v
				}
			}
		}
	}
	best := int64(inf)
	full := 1<<m - 1
	for j := range m {
		best = min(best, dp[full*m+j]+int64(in.D(int32(j+1), 0)))
	}
	return best
}

// bruteForce returns the optimal length by trying every tour that starts
// at city 0: a check of heldKarp itself, for tiny instances.
func bruteForce(in *Instance) int64 {
	n := in.N()
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(i)
	}
	best := int64(math.MaxInt64)
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			best = min(best, in.Length(t))
			return
		}
		for i := k; i < n; i++ {
			t[k], t[i] = t[i], t[k]
			rec(k + 1)
			t[k], t[i] = t[i], t[k]
		}
	}
	rec(1)
	return best
}

func TestHeldKarp(t *testing.T) {
	for n := 4; n <= 8; n++ {
		in, err := Generate(n, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		if hk, bf := heldKarp(in), bruteForce(in); hk != bf {
			t.Errorf("%d cities: Held-Karp %d, brute force %d", n, hk, bf)
		}
	}
}

func isTour(t []int32, n int) bool {
	if len(t) != n {
		return false
	}
	s := slices.Clone(t)
	slices.Sort(s)
	for i, c := range s {
		if int(c) != i {
			return false
		}
	}
	return true
}

// TestLocalSearchMoves checks every 2-opt and Or-opt move on random tours
// of several sizes: the tour stays a tour, positions stay in step, and
// every move shortens it.
func TestLocalSearchMoves(t *testing.T) {
	for _, n := range []int{5, 6, 7, 8, 9, 13, 40, 150} {
		in, err := Generate(n, 7)
		if err != nil {
			t.Fatal(err)
		}
		r := newRNG(3, n)
		s := newLocalSearch(in)
		for trial := range 20 {
			tour := make([]int32, n)
			r.perm(tour)
			s.t = tour
			for i, c := range tour {
				s.pos[c] = int32(i)
			}
			length := in.Length(tour)
			for moves := 0; ; moves++ {
				improved := false
				for c := range int32(n) {
					before := slices.Clone(tour)
					var kind string
					switch {
					case s.twoOpt(c):
						kind = "2-opt"
					case s.orOpt(c):
						kind = "Or-opt"
					default:
						continue
					}
					improved = true
					l := in.Length(tour)
					if !isTour(tour, n) {
						t.Fatalf("n=%d trial %d: %s at %d broke the tour: %v -> %v", n, trial, kind, c, before, tour)
					}
					if l >= length {
						t.Fatalf("n=%d trial %d: %s at %d went from %d to %d: %v -> %v", n, trial, kind, c, length, l, before, tour)
					}
					for i, x := range tour {
						if s.pos[x] != int32(i) {
							t.Fatalf("n=%d: %s left pos[%d] = %d, it is at %d", n, kind, x, s.pos[x], i)
						}
					}
					length = l
				}
				if !improved {
					break
				}
				s.count, s.head = 0, 0
				clear(s.queued)
			}
		}
	}
}

func TestCanonical(t *testing.T) {
	tmp := make([]int32, 5)
	for _, tour := range [][]int32{{0, 1, 2, 3, 4}, {2, 3, 4, 0, 1}, {4, 3, 2, 1, 0}, {1, 0, 4, 3, 2}} {
		c := slices.Clone(tour)
		canonical(c, tmp)
		if !slices.Equal(c, []int32{0, 1, 2, 3, 4}) {
			t.Errorf("canonical(%v) = %v", tour, c)
		}
	}
}

func TestOperatorsKeepTours(t *testing.T) {
	in, err := Generate(30, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultParams()
	is := newIsland(in, &p)
	a, b := make([]int32, 30), make([]int32, 30)
	tmp := make([]int32, 30)
	for range 500 {
		is.rng.perm(a)
		is.rng.perm(b)
		child := make([]int32, 30)
		is.orderCrossover(child, a, b)
		if !isTour(child, 30) {
			t.Fatalf("OX of %v and %v gave %v", a, b, child)
		}
		doubleBridge(child, tmp, is.rng)
		if !isTour(child, 30) {
			t.Fatalf("double bridge gave %v", child)
		}
	}
	small := []int32{0, 1, 2, 3, 4}
	doubleBridge(small, tmp, is.rng)
	if !isTour(small, 5) {
		t.Fatalf("double bridge on 5 cities gave %v", small)
	}
}

func TestRNG(t *testing.T) {
	// SplitMix64's reference output for seed 0.
	if got := (&rng{}).next(); got != 0xe220a8397b1dcdaf {
		t.Errorf("SplitMix64(0) = %#x, want 0xe220a8397b1dcdaf", got)
	}
	// Pinned: every result depends on these numbers.
	r := newRNG(1, 0)
	got := []uint64{r.next(), r.next(), r.next()}
	want := []uint64{0x108c40ea43b9a2d8, 0x1ad753efecbe4aec, 0xa7577951db8aa8ea}
	if !slices.Equal(got, want) {
		t.Errorf("newRNG(1, 0) draws %#x, want %#x", got, want)
	}
	counts := make([]int, 7)
	for range 70000 {
		counts[r.intn(7)]++
	}
	for i, c := range counts {
		if c < 9500 || c > 10500 {
			t.Errorf("intn(7) gave %d %d times in 70000", i, c)
		}
	}
	for range 1000 {
		if f := r.float64(); f < 0 || f >= 1 {
			t.Fatalf("float64() = %v", f)
		}
	}
	if a, b := newRNG(1, 0).next(), newRNG(1, 1).next(); a == b {
		t.Error("islands 0 and 1 draw the same numbers")
	}
}

func TestSeedTinyInstance(t *testing.T) {
	// 4 cities have 3 distinct tours: a population of 10 must still fill.
	in, err := Generate(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultParams()
	p.Population = 10
	is := newIsland(in, &p)
	if err := is.seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := is.step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(is.pop) != 10 || is.best().length != heldKarp(in) {
		t.Errorf("population %d, best %d, optimum %d", len(is.pop), is.best().length, heldKarp(in))
	}
}
