package job

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// TestSpoolMatchesDatabase: report.json written from the spool is the one
// written from the job database, byte for byte, whichever place each
// record is in (left memory decided, reopened and decided again, in
// memory, never tried); the spool does not cover tasks an earlier run
// left in the database, nor a job past its bound. The text is read from
// both of the spool's places (its file and its chunk in memory).
func TestSpoolMatchesDatabase(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	var tasks []spec.Task
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		tasks = append(tasks, spec.Task{ID: id, Params: map[string]any{"n": id, "html": "<&>"}})
	}
	r := &runner{
		p:   &Prepared{OutDir: out, Spec: &spec.Job{Name: "x", Tasks: spec.TaskList(tasks)}},
		log: slog.New(slog.DiscardHandler),
	}
	var err error
	if r.db, err = jobdb.Open(ctx, filepath.Join(out, jobdb.FileName), jobdb.Options{}); err != nil {
		t.Fatal(err)
	}
	defer r.db.Close()
	rs := newRecords(r, len(tasks))
	r.recs = rs
	t0 := time.Date(2026, 11, 24, 1, 2, 3, 456, time.FixedZone("X", 3600))
	decide := func(i int, state, peer string) {
		rec := rs.Task(i)
		rec.State, rec.Peer, rec.Digest = state, peer, "d"+rec.ID
		if state == report.TaskFailed {
			// Longer than a chunk: it outgrows the first, and the next
			// task's text goes to a second.
			rec.Error = strings.Repeat("e", spoolChunk+spoolChunk/2)
		}
		rec.Attempts = append(rec.Attempts, report.Attempt{Peer: peer, Start: t0, End: t0.Add(time.Millisecond), Outcome: report.OutcomeOK})
		if err := r.db.PutTask(i, rec); err != nil {
			t.Fatal(err)
		}
		rs.journaled(i)
	}
	decide(0, report.TaskDone, "p1@0123456-89ab-cdef-0123-4567-89ab-cdef")
	decide(2, report.TaskFailed, "p2")
	decide(3, report.TaskDone, "p2")
	decide(3, report.TaskDone, "p3") // reopened: read back, a second attempt
	rs.Task(1).State = report.TaskRunning
	if !rs.spool.covers(rs) {
		t.Fatal("the spool does not cover the tasks decided in this run")
	}
	if rs.spool.spilled == 0 || len(rs.spool.buf) == 0 {
		t.Fatalf("the spool's file holds %d bytes, its chunk %d: the test reads from only one of them", rs.spool.spilled, len(rs.spool.buf))
	}

	var fromSpool, fromDB bytes.Buffer
	head := &report.Report{Name: "x", State: report.StateRunning}
	if err := report.EncodeRaw(&fromSpool, head, rs.spool.each(rs)); err != nil {
		t.Fatal(err)
	}
	if err := r.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ro, err := jobdb.OpenReadOnly(ctx, r.db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := report.EncodeEach(&fromDB, head, func(yield func(*report.Task) error) error {
		return rs.each(ctx, ro, func(_ int, t *report.Task) error { return yield(jobdb.AsStored(t)) })
	}); err != nil {
		t.Fatal(err)
	}
	if fromSpool.String() != fromDB.String() {
		t.Fatalf("from the spool:\n%s\nfrom the database:\n%s", fromSpool.String(), fromDB.String())
	}
	if !bytes.Contains(fromSpool.Bytes(), []byte(`"peer": "p3"`)) || bytes.Count(fromSpool.Bytes(), []byte(`"outcome"`)) != 4 {
		t.Fatalf("the reopened task's second attempt is missing:\n%s", fromSpool.String())
	}

	rs.setCold(5) // as reuse leaves a task an earlier run finished
	if rs.spool.covers(rs) {
		t.Error("the spool covers a task only the database holds")
	}
	if big := newSpool(out, spoolMaxTasks+1); big.on {
		t.Error("a job past spoolMaxTasks keeps a spool")
	}
}
