package job

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// BenchmarkSpool is the guard of the report spool (`just bench-guard`):
// report.json's text of n decided tasks at a run's end. from=spool is
// what the runner does: each record is encoded as it leaves memory
// (spool.put, paid during the run, counted here; the text goes to the
// spool's file a chunk at a time) and the text is yielded from the spool
// at the end (spool.each). from=db is the plain alternative:
// every record read back from the job database and encoded. One op = the
// whole job; ns/task is per task.
func BenchmarkSpool(b *testing.B) {
	const n = 4096
	ctx := context.Background()
	tasks := doneTasks(n)
	var sink int
	b.Run("from=spool", func(b *testing.B) {
		dir := b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			rs := &records{kind: make([]uint8, n), spool: newSpool(dir, n)}
			for i := range tasks {
				rs.spool.put(i, &tasks[i])
				rs.kind[i] = recCold
			}
			if !rs.spool.covers(rs) {
				b.Fatal("the spool does not cover the job")
			}
			if err := rs.spool.each(rs)(func(raw []byte) error { sink += len(raw); return nil }); err != nil {
				b.Fatal(err)
			}
			rs.spool.close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	})
	b.Run("from=db", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), jobdb.FileName)
		db, err := jobdb.Open(ctx, path, jobdb.Options{Version: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		for i := range tasks {
			if err := db.PutTask(i, &tasks[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if db, err = jobdb.OpenClosed(ctx, path); err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		b.ReportAllocs()
		b.ResetTimer()
		var buf []byte
		for b.Loop() {
			if err := db.EachTask(ctx, func(_ int, t *report.Task) error {
				buf, err = report.AppendTask(buf[:0], t)
				sink += len(buf)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	})
	_ = sink
}

// doneTasks is n records of echo tasks done in one attempt.
func doneTasks(n int) []report.Task {
	start := time.Date(2026, 11, 24, 1, 2, 3, 456789, time.UTC)
	tasks := make([]report.Task, n)
	for i := range tasks {
		id := strconv.Itoa(i)
		tasks[i] = report.Task{ID: id, Params: json.RawMessage(`{"i":` + id + `}`), State: report.TaskDone, Peer: "node1@ab12cd34",
			Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Files: []string{"tasks/" + id + "/data"},
			Attempts: []report.Attempt{{Peer: "node1@ab12cd34", Start: start, End: start.Add(time.Millisecond), Outcome: report.OutcomeOK}}}
	}
	return tasks
}
