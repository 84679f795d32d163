//go:build linux

package pluginhost

import (
	"context"
	"testing"

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
