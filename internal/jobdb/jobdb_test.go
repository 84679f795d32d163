package jobdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

func open(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

var t0 = time.Date(2026, 11, 24, 1, 2, 3, 456789000, time.UTC)

func sampleReport() *report.Report {
	return &report.Report{
		Format: report.Format, JobID: "abc", Name: "demo", Spec: "job.yaml", State: report.StateRunning,
		Started: t0, Node: "here",
		Plugin:   report.Plugin{Path: "/p", Digest: "d", Name: "echo", Version: "1"},
		Summary:  report.Summary{Total: 3, Done: 1, Failed: 1},
		Warnings: []string{"w"},
		Tasks: []report.Task{
			{ID: "a", Params: json.RawMessage(`{"n":1}`), State: report.TaskDone, Peer: "p1", PeerID: "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE-FFFFF-GGGG",
				Digest: "dd", Files: []string{"tasks/a/data"}, Verdict: "accepted: 2 of 2 votes agree",
				Attempts: []report.Attempt{{Peer: "p1", Start: t0, End: t0.Add(time.Second), Outcome: report.OutcomeOK}},
				Votes:    []report.Vote{{Peer: "p1", Digest: "dd"}, {Peer: "p2", Digest: "dd"}},
				Partials: []report.Partial{{Time: t0, Peer: "p1", Text: "half"}, {Time: t0, Peer: "p1", Bytes: []byte{0, 1}, Truncated: true}}},
			{ID: "b", Params: json.RawMessage(`{"n":2}`), State: report.TaskFailed,
				Attempts: []report.Attempt{{Peer: "here", Start: t0, End: t0.Add(2 * time.Second), Outcome: report.OutcomeTaskError, Error: "boom"}}},
			{ID: "c", Params: json.RawMessage(`{"n":3}`), State: report.TaskPending, Attempts: []report.Attempt{}},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	want := sampleReport()
	want.Tasks[0].Attempts[0].Device = "GPU 1: NVIDIA H200, 143771 MiB, GPU-1" // schema 5
	if err := db.PutJob(want); err != nil {
		t.Fatal(err)
	}
	for i := range want.Tasks {
		if err := db.PutTask(i, &want.Tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.MarshalIndent(got, "", " ")
		b, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("round trip differs:\ngot  %s\nwant %s", a, b)
	}
}

// TestCoalesce: many changes of one task inside a batch leave the last.
func TestCoalesce(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), FileName), Options{Delay: time.Hour, MaxBatch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task := report.Task{ID: "x", Params: json.RawMessage(`{}`), State: report.TaskPending}
	for i := range 10 {
		task.Attempts = append(task.Attempts, report.Attempt{Peer: "p", Start: t0, End: t0, Outcome: report.OutcomeCrashed})
		task.Checkpoints = i
		if err := db.PutTask(0, &task); err != nil {
			t.Fatal(err)
		}
	}
	// Delay and MaxBatch are far: the ten changes share one batch, which
	// Close ends.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, db.Path())
	defer db.Close()
	got, err := db.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 1 || len(got.Tasks[0].Attempts) != 10 || got.Tasks[0].Checkpoints != 9 {
		t.Fatalf("got %+v", got.Tasks)
	}
}

// TestFlushBounded: a change is committed within about Delay, without
// Close: a reader sees it.
func TestFlushBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(context.Background(), path, Options{Delay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task := report.Task{ID: "x", Params: json.RawMessage(`{}`), State: report.TaskDone}
	if err := db.PutTask(0, &task); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	s, err := ro.Status(ctx, time.Now(), time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	if s.Done != 1 {
		t.Fatalf("reader sees %d done, want 1", s.Done)
	}
}

func TestOutputs(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		db.PutTask(i, &report.Task{ID: id, Params: json.RawMessage(`{}`), State: report.TaskDone})
	}
	db.PutOutput(0, "data", []byte("first"))
	db.PutOutput(2, "data", nil)
	db.PutOutput(0, "data", []byte("again"))
	db.PutOutput(1, "data", []byte("gone"))
	db.DeleteOutput(1)
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []Output
	if err := db.Outputs(ctx, func(o Output) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []Output{{0, "a", json.RawMessage(`{}`), "data", []byte("again")}, {2, "c", json.RawMessage(`{}`), "data", []byte{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs %+v, want %+v", got, want)
	}
	if _, _, found, err := db.Output(ctx, 1); err != nil || found {
		t.Fatalf("deleted output: found %v, err %v", found, err)
	}
	db.Close()
}

// TestBadFiles: what Open says of files it must not use, and that it
// leaves them as they were.
func TestBadFiles(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.db")
	db := open(t, good)
	for i := range 2000 {
		db.PutTask(i, &report.Task{ID: "t" + strconv.Itoa(i), Params: json.RawMessage(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`), State: report.TaskDone})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "newer.db")
	db = open(t, newer)
	if _, err := db.SQL().Exec("INSERT INTO schema_version(version, p2pc, applied) VALUES (99, 'v9.9', '')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	cases := []struct {
		name    string
		data    []byte // nil: the file newer
		want    error
		message string
	}{
		{"garbage", []byte("this is not a database at all, just some text\n"), ErrCorrupt, "not a SQLite database"},
		{"short", []byte("SQLite"), ErrCorrupt, "not a SQLite database"},
		{"foreign", foreign(t), ErrCorrupt, "not a p2pc job's"},
		{"truncated", content[:len(content)/2], ErrCorrupt, "corrupted"},
		{"scribbled", scribble(content), ErrCorrupt, "corrupted"},
		{"newer", nil, ErrNewer, "schema version 99 (p2pc v9.9)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newer
			if c.data != nil {
				path = filepath.Join(t.TempDir(), FileName)
				if err := os.WriteFile(path, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(path)
			for _, ro := range []bool{false, true} {
				var db *DB
				var err error
				if ro {
					db, err = OpenReadOnly(context.Background(), path)
				} else {
					db, err = Open(context.Background(), path, Options{})
				}
				if err == nil {
					db.Close()
					if c.name == "truncated" || c.name == "scribbled" {
						// A read-only open need not look at every page; a
						// full read must fail.
						db, _ = OpenReadOnly(context.Background(), path)
						_, err = db.Load(context.Background())
						db.Close()
					}
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("read-only %v: err %v, want %v", ro, err, c.want)
				}
				if !strings.Contains(err.Error(), c.message) {
					t.Fatalf("read-only %v: %q does not say %q", ro, err, c.message)
				}
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Fatal("the file was changed")
			}
		})
	}
}

// scribble overwrites the middle of a database with noise, leaving the
// header intact.
func scribble(b []byte) []byte {
	b = append([]byte(nil), b...)
	for i := len(b) / 3; i < len(b)/3+8192 && i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// TestFull: a full database (SQLite's page limit stands in for a full
// disk) makes the writer's error sticky, says so, and keeps what was
// committed before.
func TestFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	ctx := context.Background()
	db.PutTask(0, &report.Task{ID: "kept", Params: json.RawMessage(`{}`), State: report.TaskDone})
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.SQL().QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec("PRAGMA max_page_count = " + strconv.Itoa(pages+1)); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20)
	db.PutOutput(0, "data", big)
	err := db.Flush(ctx)
	if !errors.Is(err, ErrFull) {
		t.Fatalf("flush: %v, want ErrFull", err)
	}
	if err := db.PutTask(1, &report.Task{ID: "later", State: report.TaskDone}); !errors.Is(err, ErrFull) {
		t.Fatalf("put after a full disk: %v, want the sticky ErrFull", err)
	}
	if err := db.Close(); !errors.Is(err, ErrFull) {
		t.Fatalf("close: %v, want ErrFull", err)
	}
	db = open(t, path)
	defer db.Close()
	got, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 1 || got.Tasks[0].ID != "kept" {
		t.Fatalf("after a full disk the database holds %+v", got.Tasks)
	}
}

func TestStatus(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), FileName))
	defer db.Close()
	ctx := context.Background()
	now := t0.Add(10 * time.Second)
	rep := &report.Report{JobID: "j", Name: "n", State: report.StateRunning, Started: t0, Summary: report.Summary{Total: 10}}
	db.PutJob(rep)
	states := []string{report.TaskDone, report.TaskDone, report.TaskDone, report.TaskDone, report.TaskFailed, report.TaskRunning, report.TaskPending}
	for i, st := range states {
		task := report.Task{ID: "t" + strconv.Itoa(i), Params: json.RawMessage(`{}`), State: st}
		switch st {
		case report.TaskDone:
			task.Attempts = []report.Attempt{{Peer: "p", Start: t0, End: t0.Add(time.Duration(i+1) * time.Second), Outcome: report.OutcomeOK}}
		case report.TaskFailed:
			task.Attempts = []report.Attempt{
				{Peer: "p", Start: t0, End: t0.Add(time.Second), Outcome: report.OutcomeCrashed, Error: "first"},
				{Peer: "q", Start: t0, End: t0.Add(3 * time.Second), Outcome: report.OutcomeTaskError, Error: "second"},
			}
		}
		db.PutTask(i, &task)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := db.Status(ctx, now, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 10 || s.Done != 4 || s.Failed != 1 || s.Running != 1 || s.Queued != 4 {
		t.Fatalf("counts %+v", s)
	}
	if s.Rate != 0.4 { // 4 done in the 10 s since the start
		t.Fatalf("rate %v, want 0.4", s.Rate)
	}
	if s.ETA != 12500*time.Millisecond { // 5 left at 0.4/s
		t.Fatalf("eta %v", s.ETA)
	}
	if len(s.Failures) != 1 || s.Failures[0].Error != "second" || s.Failures[0].Task != "t4" {
		t.Fatalf("failures %+v", s.Failures)
	}
}

// foreign is a SQLite database that is not a job database.
func foreign(t *testing.T) []byte {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('mine')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEmpty: a database made but killed before its first commit reads
// as holding no job, and a writer makes it a job database.
func TestEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 0; VACUUM"); err != nil { // a header, no tables
		t.Fatal(err)
	}
	db.Close()
	ctx := context.Background()
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ro.Load(ctx)
	if err != nil || rep.JobID != "" {
		t.Fatalf("load: %+v, %v", rep, err)
	}
	if s, err := ro.Status(ctx, time.Now(), time.Minute, 1); err != nil || s.Total != 0 {
		t.Fatalf("status: %+v, %v", s, err)
	}
	ro.Close()
	w := open(t, path)
	if v, err := w.Version(ctx); err != nil || v != SchemaVersion {
		t.Fatalf("version %d, %v", v, err)
	}
	w.Close()
}

// TestIncremental: a task written again writes only what changed, and
// still reads back as it was put: attempts appended, votes recounted,
// partial results shifted, and rows an earlier run left replaced.
func TestIncremental(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	att := func(n int) report.Attempt {
		return report.Attempt{Peer: "p" + strconv.Itoa(n), Start: t0, End: t0.Add(time.Duration(n) * time.Second), Outcome: report.OutcomeTaskError, Error: "e" + strconv.Itoa(n)}
	}
	check := func(db *DB, want report.Task) {
		t.Helper()
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := db.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tasks) != 1 {
			t.Fatalf("%d tasks", len(got.Tasks))
		}
		g := got.Tasks[0]
		if g.State != want.State || !reflect.DeepEqual(g.Attempts, want.Attempts) || len(g.Votes) != len(want.Votes) || len(g.Partials) != len(want.Partials) {
			t.Fatalf("got %+v\nwant %+v", g, want)
		}
		for i := range want.Partials {
			if g.Partials[i].Text != want.Partials[i].Text {
				t.Fatalf("partial %d: %q, want %q", i, g.Partials[i].Text, want.Partials[i].Text)
			}
		}
	}
	db := open(t, path)
	task := report.Task{ID: "a", Params: json.RawMessage(`{}`), State: report.TaskRunning, Attempts: []report.Attempt{att(0), att(1), att(2)},
		Votes: []report.Vote{{Peer: "x", Digest: "d"}, {Peer: "y", Digest: "d"}}, Partials: []report.Partial{{Time: t0, Peer: "p", Text: "1"}, {Time: t0, Peer: "p", Text: "2"}}}
	db.PutTask(0, &task)
	check(db, task)
	task.Attempts = append(task.Attempts, att(3))
	task.Votes = task.Votes[:1]
	task.Partials = []report.Partial{task.Partials[1], {Time: t0, Peer: "p", Text: "3"}}
	db.PutTask(0, &task)
	check(db, task)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A rerun starts the task afresh: the earlier run's rows go.
	db = open(t, path)
	defer db.Close()
	task = report.Task{ID: "a", Params: json.RawMessage(`{}`), State: report.TaskPending, Attempts: []report.Attempt{}}
	db.PutTask(0, &task)
	check(db, task)
	task.State, task.Attempts = report.TaskDone, []report.Attempt{att(7)}
	db.PutTask(0, &task)
	check(db, task)
}

// TestManyRows: rows gathered into statements of many rows (and the rest
// one at a time) all arrive, each in its place.
func TestManyRows(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), FileName))
	defer db.Close()
	const n = 3*multiRows + 5
	for i := range n {
		id := strconv.Itoa(i)
		task := report.Task{ID: id, Params: json.RawMessage(`{"i":` + id + `}`), State: report.TaskDone, Digest: "d" + id,
			Attempts: []report.Attempt{{Peer: "p", Start: t0, End: t0, Outcome: report.OutcomeLost, Error: "a" + id}, {Peer: "p", Start: t0, End: t0, Outcome: report.OutcomeOK}},
			Votes:    []report.Vote{{Peer: "p", Digest: "d" + id}}}
		if err := db.PutTask(i, &task); err != nil {
			t.Fatal(err)
		}
		if err := db.PutOutput(i, "data", []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Load(ctx)
	if err != nil || len(rep.Tasks) != n {
		t.Fatalf("%d tasks, %v", len(rep.Tasks), err)
	}
	for i, task := range rep.Tasks {
		id := strconv.Itoa(i)
		if task.ID != id || string(task.Params) != `{"i":`+id+`}` || len(task.Attempts) != 2 || task.Attempts[0].Error != "a"+id ||
			len(task.Votes) != 1 || task.Votes[0].Digest != "d"+id {
			t.Fatalf("task %d: %+v", i, task)
		}
		if _, data, found, err := db.Output(ctx, i); !found || err != nil || string(data) != id {
			t.Fatalf("output %d: %q %v %v", i, data, found, err)
		}
	}
	// Updates of rows this writer wrote (upserts, many to a statement):
	// the state changes, id and params stay, no row is added.
	for i := range n {
		task := rep.Tasks[i]
		task.State, task.Digest, task.Error = report.TaskFailed, "", "e"+strconv.Itoa(i)
		task.Params = json.RawMessage(`"ignored"`)
		if err := db.PutTask(i, &task); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = db.Load(ctx)
	if err != nil || len(rep.Tasks) != n {
		t.Fatalf("%d tasks, %v", len(rep.Tasks), err)
	}
	for i, task := range rep.Tasks {
		id := strconv.Itoa(i)
		if task.ID != id || string(task.Params) != `{"i":`+id+`}` || task.State != report.TaskFailed || task.Digest != "" ||
			task.Error != "e"+id || len(task.Attempts) != 2 || len(task.Votes) != 1 {
			t.Fatalf("updated task %d: %+v", i, task)
		}
	}
}

func TestMultiRowQuery(t *testing.T) {
	for _, c := range []struct {
		query string
		rows  int
		want  string
	}{
		{"INSERT INTO t(a, b) VALUES (?, ?)", 1, "INSERT INTO t(a, b) VALUES (?, ?)"},
		{"INSERT INTO t(a, b) VALUES (?, ?)", 3, "INSERT INTO t(a, b) VALUES (?, ?), (?, ?), (?, ?)"},
		{"INSERT INTO t(a, b) VALUES (?, ?) ON CONFLICT(a) DO UPDATE SET b = excluded.b", 2,
			"INSERT INTO t(a, b) VALUES (?, ?), (?, ?) ON CONFLICT(a) DO UPDATE SET b = excluded.b"},
	} {
		if got := multiRowQuery(c.query, c.rows); got != c.want {
			t.Errorf("multiRowQuery(%q, %d) = %q, want %q", c.query, c.rows, got, c.want)
		}
	}
}
