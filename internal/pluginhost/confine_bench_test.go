//go:build linux

package pluginhost

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// BenchmarkWarmRunLimits is BenchmarkWarmRun with the limits p2pc join
// gives its tasks by default: idle priority (SCHED_IDLE) and a memory
// limit. Compare with P2PC_SANDBOX=off in the same run (see
// docs/sandbox.md, "Measuring the cost").
func BenchmarkWarmRunLimits(b *testing.B) {
	cfg, _ := testConfig(b, "task")
	cfg.Limits = sandbox.Limits{Idle: true, Memory: 1 << 30}
	pl := NewPool(cfg, 1)
	b.Cleanup(func() { pl.Close() })
	ctx := context.Background()
	r := req("bench", params{Op: "echo", Msg: "hello"})
	pid := runPID(b, pl)
	b.ReportAllocs()
	plugin0, host0 := procCPU(b, pid), selfCPU()
	for b.Loop() {
		if _, err := pl.Run(ctx, r, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, pid, plugin0, host0)
}

// BenchmarkPoolLife: one pool's life as a local p2pc run lives it, each
// part timed: the first process's start (Describe), a second process
// started for two tasks at once, and Close (both killed, their cgroups
// removed). Confined and not, in the same run:
//
//	go test ./internal/pluginhost -run '^$' -bench PoolLife -benchtime 40x -count 5
func BenchmarkPoolLife(b *testing.B) {
	for _, confined := range []bool{true, false} {
		name := "confined"
		if !confined {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			if !confined {
				b.Cleanup(sandbox.DisableForTest())
			}
			cfg, _ := testConfig(b, "task")
			ctx := context.Background()
			var first, second, closing time.Duration
			host0 := selfCPU()
			for b.Loop() {
				pl := NewPool(cfg, 2)
				t0 := time.Now()
				if _, err := pl.Describe(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						if _, err := pl.Run(ctx, req("pid", params{Op: "pid", MS: 20}), nil, 0); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				t2 := time.Now()
				pl.Close()
				first, second, closing = first+t1.Sub(t0), second+t2.Sub(t1), closing+time.Since(t2)
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(per(first), "first-start-ms")
			b.ReportMetric(per(second)-20, "second-start-ms") // less the task's 20 ms
			b.ReportMetric(per(closing), "close-ms")
			b.ReportMetric(per(selfCPU()-host0), "host-cpu-ms/op")
		})
	}
}
