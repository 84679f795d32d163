package main

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkGeneration measures one generation of an island of 64 tours,
// from a population seeded and evolved for 20 generations.
func BenchmarkGeneration(b *testing.B) {
	for _, n := range []int{52, 200, 1000} {
		b.Run(fmt.Sprintf("cities=%d", n), func(b *testing.B) {
			in, err := Generate(n, 1)
			if err != nil {
				b.Fatal(err)
			}
			p := DefaultParams()
			p.Generations = 1 << 30
			is := newIsland(in, &p)
			ctx := context.Background()
			if err := is.seed(ctx); err != nil {
				b.Fatal(err)
			}
			for range 20 {
				is.step(ctx)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := is.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(is.best().length), "best_length")
		})
	}
}
