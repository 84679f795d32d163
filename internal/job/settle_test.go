package job

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/spec"
)

// TestSettleInline: a peer's result that is only inline data goes into
// the job database from memory: no folder under the work root or the
// output folder, ever. A result whose data does not match its digest is
// the peer's fault, and nothing is stored.
func TestSettleInline(t *testing.T) {
	digestOf := func(data []byte) []byte { d := outputs.DigestInline(data); return d[:] }
	for _, c := range []struct {
		name    string
		outputs []*peerpb.Output
		digest  []byte
		state   string
		stored  []byte // nil: no output row
	}{
		{"data", []*peerpb.Output{{Name: "data", Size: 6, Data: []byte("hello\n")}}, digestOf([]byte("hello\n")), report.TaskDone, []byte("hello\n")},
		// proto3 sends an empty data file's bytes as nothing at all.
		{"empty data file", []*peerpb.Output{{Name: "data", Size: 0}}, digestOf([]byte{}), report.TaskDone, []byte{}},
		{"no output", nil, digestOf(nil), report.TaskDone, nil},
		{"digest mismatch", []*peerpb.Output{{Name: "data", Size: 2, Data: []byte("no")}}, digestOf([]byte("yes")), report.TaskPending, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			r, out := testRunner(t, 1)
			w, l := leasedWorker(t, r)
			w.settle(ctx, &peerpb.Result{LeaseId: l.ID, Outcome: report.OutcomeOK, Digest: c.digest, Outputs: c.outputs})

			r.mu.Lock()
			rec := *r.recs.Task(0)
			r.mu.Unlock()
			if rec.State != c.state {
				t.Fatalf("state %s, want %s (attempts %+v)", rec.State, c.state, rec.Attempts)
			}
			if ents, _ := os.ReadDir(filepath.Join(out, "tasks")); len(ents) != 0 {
				t.Errorf("tasks folder holds %v", ents)
			}
			if err := r.db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			_, data, found, err := r.db.Output(ctx, 0)
			if err != nil || found != (c.stored != nil) || !bytes.Equal(data, c.stored) {
				t.Errorf("stored %q (found %v, %v), want %q", data, found, err, c.stored)
			}
		})
	}
}

// testRunner is a runner of n tasks (t0, t1, ...) with its job database
// and output folder (out), and no journal goroutine: a test journals
// itself.
func testRunner(t *testing.T, n int) (r *runner, out string) {
	t.Helper()
	out = t.TempDir()
	tasks := make([]spec.Task, n)
	for i := range tasks {
		tasks[i] = spec.Task{ID: fmt.Sprintf("t%d", i), Params: map[string]any{"i": int64(i)}}
	}
	r = &runner{
		p:       &Prepared{OutDir: out, Spec: &spec.Job{Name: "x", Tasks: spec.TaskList(tasks)}},
		opts:    RunOptions{Events: nopEvents{}, Node: "me"},
		log:     slog.New(slog.DiscardHandler),
		kick:    make(chan struct{}, 1),
		faulted: make(chan struct{}),
		rep:     &report.Report{},
		marks:   make([]uint8, n),
	}
	r.recs = newRecords(r, n)
	// No work root at all: settling an inline result must not need
	// one (a folder made there would fail the attempt).
	r.workRoot = filepath.Join(out, ".p2pc", "work")
	if err := os.MkdirAll(filepath.Join(out, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.db, err = jobdb.Open(context.Background(), filepath.Join(out, jobdb.FileName), jobdb.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	if err := r.scanFolders(n); err != nil {
		t.Fatal(err)
	}
	return r, out
}

// TestJournalHoldsRunning: the journal's pass holds a leased task's row
// back while it runs, up to holdRunning: a task done by then is written
// once, done; one still running is written as running after it. A pass
// that is not the journal's (the run's end, the job over) writes it at
// once.
func TestJournalHoldsRunning(t *testing.T) {
	ctx := context.Background()
	r, _ := testRunner(t, 3)
	q := newQueue(r, []int{0, 1, 2}, false)
	defer q.Close()
	var ls []*sched.Lease
	for range 3 {
		l, err := q.Next(ctx, "p1@X")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		// The lease carries its record's params: no second encoding.
		if got, want := string(r.params(l)), string(r.p.Spec.TaskParamsJSON(l.Task)); got != want || len(l.Params) == 0 {
			t.Errorf("lease params %s (%q on the lease), want %s", got, l.Params, want)
		}
	}
	pass := func(hold bool) {
		t.Helper()
		r.mu.Lock()
		err := r.journalPassLocked(hold)
		r.mu.Unlock()
		if err == nil {
			err = r.db.Flush(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := func(states ...string) {
		t.Helper()
		for i, want := range states {
			got := "none"
			if rec, found, err := r.db.LoadTask(ctx, i); err != nil {
				t.Fatal(err)
			} else if found {
				got = rec.State
			}
			if got != want {
				t.Errorf("task %d: row %s, want %s", i, got, want)
			}
		}
	}
	pass(true)
	want("none", "none", "none")

	w := &remoteWorker{s: &Session{r: r, q: q, workRoot: r.workRoot}, peer: Peer{Name: "p1@X"}, leases: map[uint64]*sched.Lease{ls[0].ID: ls[0]}}
	d := outputs.DigestInline(nil)
	w.settle(ctx, &peerpb.Result{LeaseId: ls[0].ID, Outcome: report.OutcomeOK, Digest: d[:]})
	pass(true)
	want(report.TaskDone, "none", "none")

	r.mu.Lock()
	for i := range r.held {
		if r.held[i].task == 1 {
			r.held[i].at = r.held[i].at.Add(-holdRunning) // held long enough
		}
	}
	r.mu.Unlock()
	pass(true)
	want(report.TaskDone, report.TaskRunning, "none")

	pass(false)
	want(report.TaskDone, report.TaskRunning, report.TaskRunning)
}

// TestSlotWork: a local slot keeps its work folder while tasks leave it
// empty, and a task that leaves something behind gets it removed, so the
// next task starts in a new, empty folder.
func TestSlotWork(t *testing.T) {
	sw := &slotWork{dir: filepath.Join(t.TempDir(), "local0")}
	sw.clear() // never made: nothing to do
	if err := os.Mkdir(sw.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sw.made = true
	sw.clear()
	if !sw.made || !taskrun.EmptyDir(sw.dir) {
		t.Fatalf("empty folder not kept: made %v", sw.made)
	}
	if err := os.WriteFile(filepath.Join(sw.dir, "scratch"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sw.clear()
	if _, err := os.Lstat(sw.dir); sw.made || err == nil {
		t.Fatalf("folder with leftovers kept: made %v, %v", sw.made, err)
	}
}

// A peer's output named with a control character is a malformed result
// on the coordinator too (a peer that skipped its own check).
func TestSettleRefusesControlCharacterNames(t *testing.T) {
	ctx := context.Background()
	r, _ := testRunner(t, 1)
	w, l := leasedWorker(t, r)
	name := "a\nb"
	w.settle(ctx, &peerpb.Result{LeaseId: l.ID, Outcome: report.OutcomeOK, Digest: make([]byte, 32),
		Outputs: []*peerpb.Output{{Name: "data", Size: 1, Data: []byte("x")}, {Name: name, Size: 1, Data: []byte("y")}}})
	r.mu.Lock()
	rec := *r.recs.Task(0)
	r.mu.Unlock()
	if len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != report.OutcomeLost || !strings.Contains(rec.Attempts[0].Error, "control character") {
		t.Fatalf("attempts %+v, want one lost to a malformed result naming the control character", rec.Attempts)
	}
}

// leasedWorker is the session of peer p1@X over r's queue of task 0,
// holding its lease l (the queue is closed at the test's end).
func leasedWorker(t *testing.T, r *runner) (*remoteWorker, *sched.Lease) {
	t.Helper()
	q := newQueue(r, []int{0}, false)
	t.Cleanup(q.Close)
	l, err := q.Next(context.Background(), "p1@X")
	if err != nil {
		t.Fatal(err)
	}
	return &remoteWorker{s: &Session{r: r, q: q, workRoot: r.workRoot}, peer: Peer{Name: "p1@X"}, leases: map[uint64]*sched.Lease{l.ID: l}}, l
}

// A result for a lease the peer does not hold is a malformed result: a
// strike each, exclusion at the job's strike limit.
func TestForgedResultStrikes(t *testing.T) {
	ctx := context.Background()
	r, _ := testRunner(t, 1)
	q := newQueue(r, []int{0}, false)
	defer q.Close()
	w := &remoteWorker{s: &Session{r: r, q: q, workRoot: r.workRoot}, peer: Peer{Name: "p1@X"}, leases: map[uint64]*sched.Lease{}}
	for i := range sched.DefaultStrikes {
		if l := w.settle(ctx, &peerpb.Result{LeaseId: uint64(1000 + i), Outcome: report.OutcomeOK}); l != nil {
			t.Fatalf("a forged result settled lease %d", l.ID)
		}
	}
	if _, err := q.Next(ctx, "p1@X"); err == nil {
		t.Fatalf("the forger still gets leases after %d forged results", sched.DefaultStrikes)
	}
	r.mu.Lock()
	excl := r.rep.Excluded
	r.mu.Unlock()
	if len(excl) != 1 || !strings.Contains(excl[0].Reason, "does not hold") {
		t.Fatalf("excluded %+v, want p1 for results of leases it does not hold", excl)
	}
}
