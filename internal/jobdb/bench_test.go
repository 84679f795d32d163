package jobdb

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// BenchmarkFinishTask measures what the coordinator's journal costs per
// finished task: its row goes from pending to done with one attempt and
// a small inline output, as a run writes it (one op = one task).
func BenchmarkFinishTask(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), FileName), Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tasks := make([]report.Task, b.N)
	for i := range tasks {
		id := strconv.Itoa(i)
		tasks[i] = report.Task{ID: id, Params: json.RawMessage(`{"i":` + id + `}`), State: report.TaskPending, Attempts: []report.Attempt{}}
		if err := db.PutTask(i, &tasks[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	data := []byte("hello\n")
	execs := db.w.execs
	b.ReportAllocs()
	b.ResetTimer()
	for i := range tasks {
		t := &tasks[i]
		t.State, t.Peer, t.Digest = report.TaskDone, "node1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		t.Attempts = append(t.Attempts, report.Attempt{Peer: "node1", Start: start, End: start.Add(time.Millisecond), Outcome: report.OutcomeOK})
		if err := db.PutOutput(i, "data", data); err != nil {
			b.Fatal(err)
		}
		if err := db.PutTask(i, t); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(db.w.execs-execs)/float64(b.N), "stmts/op")
}

// doneJob writes a closed job database of n done tasks, each with one
// attempt, as a run of the echo plugin leaves it, and returns its folder.
func doneJob(b *testing.B, n int) string {
	ctx := context.Background()
	dir := b.TempDir()
	db, err := Open(ctx, filepath.Join(dir, FileName), Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 11, 24, 1, 2, 3, 456789, time.UTC)
	rep := &report.Report{Format: report.Format, JobID: "0123", Name: "bench", State: report.StateComplete, Started: start, Finished: start.Add(time.Second), Summary: report.Summary{Total: n}}
	if err := db.PutJob(rep); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		id := strconv.Itoa(i)
		t := report.Task{ID: id, Params: json.RawMessage(`{"i":` + id + `}`), State: report.TaskDone, Peer: "node1@ab12cd34", Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			Files:    []string{"tasks/" + id + "/data"},
			Attempts: []report.Attempt{{Peer: "node1@ab12cd34", Start: start, End: start.Add(time.Millisecond), Outcome: report.OutcomeOK}}}
		if err := db.PutTask(i, &t); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkReport measures writing report.json of a finished job from its
// job database (one op = one task): reading the tasks back, and encoding.
func BenchmarkReport(b *testing.B) {
	const n = 2048
	dir := doneJob(b, n)
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		db, err := OpenClosed(ctx, filepath.Join(dir, FileName))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := db.EachTask(ctx, func(int, *report.Task) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	})
	b.Run("encode", func(b *testing.B) {
		db, err := OpenClosed(ctx, filepath.Join(dir, FileName))
		if err != nil {
			b.Fatal(err)
		}
		var tasks []report.Task
		if err := db.EachTask(ctx, func(_ int, t *report.Task) error { tasks = append(tasks, copyTask(t)); return nil }); err != nil {
			b.Fatal(err)
		}
		head, err := db.Head(ctx)
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := report.EncodeEach(io.Discard, head, func(yield func(*report.Task) error) error {
				for i := range tasks {
					if err := yield(&tasks[i]); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	})
}

// BenchmarkOpen measures making a new job database and closing it (what
// a run's start pays before its first task, beside the plugin's start).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		db, err := Open(ctx, filepath.Join(dir, strconv.Itoa(i)+".db"), Options{Version: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
}
