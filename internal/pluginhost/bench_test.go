//go:build linux

package pluginhost

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// procCPU is the CPU time (user + system) process pid has used.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	cpu, err := harness.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU that the plugin process and the host spent per
// call: less noisy than wall time on a shared machine.
func reportCPU(b *testing.B, pid int, plugin0, host0 time.Duration) {
	b.ReportMetric(float64((procCPU(b, pid)-plugin0).Microseconds())/float64(b.N), "plugin-cpu-us/op")
	b.ReportMetric(float64((selfCPU()-host0).Microseconds())/float64(b.N), "host-cpu-us/op")
}

// BenchmarkWarmRun: one task round trip through the Pool to a warm
// process (acquire, gRPC call, release).
func BenchmarkWarmRun(b *testing.B) {
	pl, _ := newTestPool(b, 1)
	ctx := context.Background()
	r := req("bench", params{Op: "echo", Msg: "hello"})
	if _, err := pl.Run(ctx, r, nil, 0); err != nil { // start it
		b.Fatal(err)
	}
	pid := runPID(b, pl)
	b.ReportAllocs()
	plugin0, host0 := procCPU(b, pid), selfCPU()
	b.ResetTimer()
	for b.Loop() {
		if _, err := pl.Run(ctx, r, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, pid, plugin0, host0)
	if s := pl.Stats(); s.Starts != 1 {
		b.Fatalf("stats %+v", s)
	}
}

// BenchmarkBareGRPC: the same call on the same kind of process through
// pluginproto.Client alone, without the pool: the floor BenchmarkWarmRun is
// compared with.
func BenchmarkBareGRPC(b *testing.B) {
	pl, _ := newTestPool(b, 1)
	ctx := context.Background()
	c, release, err := pl.bareClient(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	r := req("bench", params{Op: "echo", Msg: "hello"})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Run(ctx, r, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmRunTimeout: as BenchmarkWarmRun with a per-call timeout
// (a context.WithTimeout and gRPC deadline per call).
func BenchmarkWarmRunTimeout(b *testing.B) {
	pl, _ := newTestPool(b, 1)
	ctx := context.Background()
	r := req("bench", params{Op: "echo", Msg: "hello"})
	if _, err := pl.Run(ctx, r, nil, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := pl.Run(ctx, r, nil, 60e9); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdStart: a new process per call (checksum, start,
// handshake, attach, call, kill) — what a crash or timeout costs. Run it
// with a small -benchtime, such as 20x.
func BenchmarkColdStart(b *testing.B) {
	if b.N > 100 {
		b.Skip("a cold start takes milliseconds: use -benchtime 20x")
	}
	cfg, _ := testConfig(b, "task")
	r := req("bench", params{Op: "echo", Msg: "hello"})
	for range b.N { // not b.Loop: the guard above needs b.N
		pl := NewPool(cfg, 1)
		if _, err := pl.Run(context.Background(), r, nil, 0); err != nil {
			b.Fatal(err)
		}
		pl.Close()
	}
}

// BenchmarkWarmBatch: 200 echo tasks through one RunBatch call to a warm
// process, per task: the plugin's and the host's CPU for a task inside a
// batch (its stream message, its result's handling), without the
// coordinator or a peer around it.
func BenchmarkWarmBatch(b *testing.B) {
	const n = 200
	cfg, _ := testConfig(b, "task")
	cfg.Sandbox.ReadWrite = []string{b.TempDir()}
	pl := NewPool(cfg, 1)
	b.Cleanup(func() { pl.Close() })
	ctx := context.Background()
	pid := runPID(b, pl)
	// One empty work folder for the batch, as a slot's, where the
	// plugin may write.
	dir := filepath.Join(cfg.Sandbox.ReadWrite[0], "slot")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	tasks := make([]BatchTask, n)
	for i := range tasks {
		r := req("bench", params{Op: "echo", Msg: "hello"})
		r.WorkDir = dir
		tasks[i] = BatchTask{Ctx: ctx, Req: r}
	}
	plugin0, host0 := procCPU(b, pid), selfCPU()
	b.ResetTimer()
	for b.Loop() {
		got := 0
		if k, _ := pl.RunBatch(ctx, tasks, 0, func(i int, r BatchResult) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			got++
		}); k != n || got != n {
			b.Fatalf("ran %d, got %d results, want %d", k, got, n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((procCPU(b, pid)-plugin0).Microseconds())/float64(b.N*n), "plugin-cpu-us/task")
	b.ReportMetric(float64((selfCPU()-host0).Microseconds())/float64(b.N*n), "host-cpu-us/task")
	if s := pl.Stats(); s.Starts != 1 {
		b.Fatalf("stats %+v", s)
	}
}
