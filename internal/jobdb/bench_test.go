package jobdb

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// BenchmarkFinishTask measures what the coordinator's journal costs per
// finished task: its row goes from pending to done with one attempt and
// a small inline output, as a run writes it (one op = one task).
//
// order=tasks finishes the tasks in the order of their index;
// order=peers as 16 peers do, each working through its sixteenth of the
// tasks, their results interleaved (so a batch's rows spread over the
// table: the writer sorts them by task). temp=file is SQLite's default
// temp_store, which keeps the statement journals of multi-row statements
// in temporary files past 64 KiB; temp=memory (what Open sets) keeps them
// in memory. rows=sorted is what the writer does (a batch's rows sorted
// by task), rows=unsorted in the order they came. cpu-ns/op is the
// process's CPU time (user and system) per task, the writer's included;
// max-put-ms the longest one task's puts waited (the queue full behind a
// slow commit: the run's settling stops meanwhile).
func BenchmarkFinishTask(b *testing.B) {
	for _, order := range []string{"tasks", "peers"} {
		for _, v := range []struct{ temp, rows string }{{"file", "unsorted"}, {"memory", "unsorted"}, {"memory", "sorted"}} {
			b.Run("order="+order+"/temp="+v.temp+"/rows="+v.rows, func(b *testing.B) {
				benchFinishTask(b, order == "peers", v.temp, v.rows == "unsorted")
			})
		}
	}
}

func benchFinishTask(b *testing.B, peers bool, temp string, unsorted bool) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), FileName), Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close() // on failure; closed below
	// One connection: the pragma holds for the writer's.
	if _, err := db.sql.ExecContext(ctx, "PRAGMA temp_store = "+temp); err != nil {
		b.Fatal(err)
	}
	db.w.unsorted = unsorted // read by the writer's goroutine after the channel send of PutTask
	tasks := putPending(b, db, b.N)
	start := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	data := []byte("hello\n")
	execs := db.w.execs
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var stall time.Duration // the longest a task's puts waited for the writer
	for k := range tasks {
		i := k
		if peers {
			i = interleaved(k, len(tasks))
		}
		t := &tasks[i]
		t.State, t.Peer, t.Digest = report.TaskDone, "node1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		t.Attempts = append(t.Attempts, report.Attempt{Peer: "node1", Start: start, End: start.Add(time.Millisecond), Outcome: report.OutcomeOK})
		t0 := time.Now()
		if err := db.PutOutput(i, "data", data); err != nil {
			b.Fatal(err)
		}
		if err := db.PutTask(i, t); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(t0); d > stall {
			stall = d
		}
	}
	// Closed, the database is checkpointed: the pages the WAL holds go
	// into the file (a run closes it at the end too).
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(db.w.execs-execs)/float64(b.N), "stmts/op")
	b.ReportMetric(float64(stall.Microseconds())/1000, "max-put-ms")
}

// putPending writes n pending tasks into db, waits for their commit and
// returns them.
func putPending(b *testing.B, db *DB, n int) []report.Task {
	tasks := make([]report.Task, n)
	for i := range tasks {
		id := strconv.Itoa(i)
		tasks[i] = report.Task{ID: id, Params: json.RawMessage(`{"i":` + id + `}`), State: report.TaskPending, Attempts: []report.Attempt{}}
		if err := db.PutTask(i, &tasks[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	return tasks
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

// interleaved is the k-th task of n to finish when 16 peers each work
// through a sixteenth of the tasks in order, and their results come
// interleaved.
func interleaved(k, n int) int {
	const peers = 16
	if n%peers != 0 {
		return k
	}
	return (k%peers)*(n/peers) + k/peers
}

// cpuTime is the process's CPU time so far (user and system), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
