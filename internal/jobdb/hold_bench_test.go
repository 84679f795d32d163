package jobdb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// BenchmarkHoldRunning is the guard of the journal's hold marks (`just
// bench-guard`; job.runner.journalPassLocked): a running task's row waits
// up to a second before it is written, so that a task done by then has
// its row written once. Tasks finish in waves of 16 (a swarm's slots),
// one commit per wave. rows=once is the hold: a commit carries one wave's
// done rows. rows=twice is the plain alternative: it also carries the
// next wave's running rows, each task's row written running, then done a
// commit later. One op = one task; cpu-ns/op is the process's CPU time,
// the writer's included.
func BenchmarkHoldRunning(b *testing.B) {
	for _, rows := range []string{"once", "twice"} {
		b.Run("rows="+rows, func(b *testing.B) { benchHold(b, rows == "twice") })
	}
}

func benchHold(b *testing.B, twice bool) {
	const wave = 16
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), FileName), Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close() // on failure; closed below
	n := (b.N + wave - 1) / wave * wave
	tasks := putPending(b, db, n+wave)
	start := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	data := []byte("hello\n")
	running := func(i int) error {
		t := &tasks[i]
		t.State, t.Peer = report.TaskRunning, "node1"
		t.Attempts = append(t.Attempts[:0], report.Attempt{Peer: "node1", Start: start})
		return db.PutTask(i, t)
	}
	if twice {
		for i := range wave {
			if err := running(i); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	execs := db.w.execs
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for w := 0; w < n; w += wave {
		for i := w; i < w+wave; i++ {
			t := &tasks[i]
			t.State, t.Peer, t.Digest = report.TaskDone, "node1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			t.Attempts = append(t.Attempts[:0], report.Attempt{Peer: "node1", Start: start, End: start.Add(time.Millisecond), Outcome: report.OutcomeOK})
			if err := db.PutOutput(i, "data", data); err != nil {
				b.Fatal(err)
			}
			if err := db.PutTask(i, t); err != nil {
				b.Fatal(err)
			}
			if twice {
				if err := running(i + wave); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(db.w.execs-execs)/float64(n), "stmts/op")
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}
