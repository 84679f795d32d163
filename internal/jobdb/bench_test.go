package jobdb

import (
	"context"
	"encoding/json"
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
