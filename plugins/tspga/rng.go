package main

import "math/bits"

// rng is SplitMix64 (Steele, Lea and Flood 2014): a 64-bit state that is
// its own serialization, so a checkpoint can save it and a resumed island
// draws exactly the numbers it would have drawn. Its output is fixed by
// this code alone, never by a Go release.
type rng struct{ state uint64 }

// newRNG returns a generator for the given seed and stream (the island):
// streams of one seed are decorrelated by mixing both through SplitMix64.
func newRNG(seed int64, stream int) *rng {
	r := &rng{state: uint64(seed)}
	r.state = r.next() ^ mix64(uint64(stream)+0x632be59bd9b4e019)
	return r
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	return mix64(r.state)
}

// intn returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method (no modulo bias).
func (r *rng) intn(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.next(), bound)
	if lo < bound {
		threshold := -bound % bound
		for lo < threshold {
			hi, lo = bits.Mul64(r.next(), bound)
		}
	}
	return int(hi)
}

// float64 returns a uniform float in [0, 1) from the top 53 bits.
func (r *rng) float64() float64 {
	return float64(r.next()>>11) / (1 << 53)
}

// perm fills p with a uniform random permutation of 0..len(p)-1.
func (r *rng) perm(p []int32) {
	for i := range p {
		p[i] = int32(i)
	}
	for i := len(p) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}
