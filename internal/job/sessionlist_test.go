package job

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// TestSessionListOneWritePerBatch: enrolments while the journal is busy
// cost one marshal of the session list, not one each, and the list that
// reaches job.db holds every peer, sorted.
func TestSessionListOneWritePerBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Hold the writer in a batch until every peer has enrolled.
	r, release := heldJournal(ctx, t)
	s := &sessionList{}
	var want []string
	for i := range 1000 {
		p := fmt.Sprintf("p%04d@x", 999-i)
		want = append(want, p)
		s.change(r, true, p)
	}
	close(release)
	if err := r.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	var got []string
	if err := json.Unmarshal([]byte(mustValue(t, r.db, jobdb.SessionsKey)), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("journaled %d peers (%.3q...), want the 1000 sorted", len(got), got)
	}
	s.mu.Lock()
	n := s.marshals
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("1000 enrolments during one journal batch marshalled the list %d times, want 1", n)
	}
	// A change after the write queues the next one; no change, no write.
	s.change(r, false, "p0001@x")
	s.change(r, true, "p0002@x")
	if err := r.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(mustValue(t, r.db, jobdb.SessionsKey)), &got); err != nil || slices.Contains(got, "p0001@x") || len(got) != 999 {
		t.Fatalf("after a removal: %d peers, p0001 in: %v (%v)", len(got), slices.Contains(got, "p0001@x"), err)
	}
}

// heldJournal is a runner whose job database's writer is held in a batch
// until release is closed.
func heldJournal(ctx context.Context, t *testing.T) (r *runner, release chan struct{}) {
	t.Helper()
	r = &runner{log: slog.New(slog.DiscardHandler)}
	var err error
	if r.db, err = jobdb.Open(ctx, filepath.Join(t.TempDir(), jobdb.FileName), jobdb.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	release, busy := make(chan struct{}), make(chan struct{})
	if err := r.db.PutJobValueFunc("hold", func() string { close(busy); <-release; return "" }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the writer never committed the first batch")
	}
	return r, release
}

func mustValue(t *testing.T, db *jobdb.DB, key string) string {
	t.Helper()
	v, err := db.JobValue(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSessionListDurable: durable returns only once the list of the
// version it is given is in job.db (a peer gets no lease before a rerun
// can read that it may hold results), and a later call that a commit
// already covered does not wait for the journal.
func TestSessionListDurable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, release := heldJournal(ctx, t)
	s := &sessionList{}
	v := s.change(r, true, "a@x")
	durable := make(chan error, 1)
	go func() { durable <- s.durable(ctx, r, v) }()
	select {
	case err := <-durable:
		t.Fatalf("durable returned (%v) while the journal held the list back", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	if got := mustValue(t, r.db, jobdb.SessionsKey); got != `["a@x"]` {
		t.Fatalf("durable returned with %q in job.db, want [\"a@x\"]", got)
	}
	// Covered: no flush (a closed database would fail one).
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.durable(ctx, r, v); err != nil {
		t.Fatalf("durable of a committed version: %v", err)
	}
	if err := s.durable(ctx, r, s.change(r, true, "b@x")); err == nil {
		t.Fatal("durable with a closed journal: no error")
	}
}

// TestSessionListDurableHoldsTheJob: once the list naming a peer is
// durable (the peer may get its first lease), job.db also holds the job
// and the run's name, even though no journal pass ran yet (the first
// lease starts the first one). Before, a coordinator SIGKILLed just after
// its first leases left a list but no job: the rerun started a new run
// (no hand-over gate, another run name) and the peers' results of the
// killed one, kept under its name, were never handed over: its first
// tasks ran twice (TestSubmitterKilled, now and then).
func TestSessionListDurableHoldsTheJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, release := heldJournal(ctx, t)
	close(release)
	r.rep = &report.Report{Format: report.Format, JobID: "job1", Name: "k", State: report.StateRunning, Run: "run1", Tasks: []report.Task{}}
	r.dirty = true // as at the run's start: the first pass would write it
	s := &sessionList{}
	if err := s.durable(ctx, r, s.change(r, true, "a@x")); err != nil {
		t.Fatal(err)
	}
	rep, err := r.db.LoadJob(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.JobID != "job1" || rep.Run != "run1" {
		t.Fatalf("the peers' list is durable, but job.db holds job %q, run %q: a rerun would not resume this run", rep.JobID, rep.Run)
	}
	if got := mustValue(t, r.db, jobdb.SessionsKey); got != `["a@x"]` {
		t.Fatalf("job.db holds the list %q, want [\"a@x\"]", got)
	}
	r.mu.Lock()
	dirty := r.dirty
	r.mu.Unlock()
	if dirty {
		t.Fatal("the job's row was written, but is still marked for the journal")
	}
}
