package jobdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// TestEachTaskAndLoadTask: streaming the tasks (EachTask) and reading
// one (LoadTask) give what Load gives, and report.json written from the
// stream is the one written from the loaded report, byte for byte.
func TestEachTaskAndLoadTask(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	want := sampleReport()
	// A task with a second attempt, after one whose rows are few.
	want.Tasks = append(want.Tasks, report.Task{ID: "d", Params: json.RawMessage(`{"n":4}`), State: report.TaskDone, Peer: "p2", Digest: "ee",
		Attempts: []report.Attempt{{Peer: "p1", Start: t0, End: t0, Outcome: report.OutcomeLost, Error: "gone"}, {Peer: "p2", Start: t0, End: t0, Outcome: report.OutcomeOK}},
		Votes:    []report.Vote{{Peer: "p2", Digest: "ee"}}})
	if err := db.PutJob(want); err != nil {
		t.Fatal(err)
	}
	for i := range want.Tasks {
		if err := db.PutTask(i, &want.Tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range want.Tasks {
		got, found, err := db.LoadTask(ctx, i)
		if err != nil || !found {
			t.Fatalf("LoadTask(%d): found %v, %v", i, found, err)
		}
		if !reflect.DeepEqual(*got, want.Tasks[i]) {
			t.Errorf("LoadTask(%d) = %+v, want %+v", i, *got, want.Tasks[i])
		}
	}
	if _, found, err := db.LoadTask(ctx, len(want.Tasks)); found || err != nil {
		t.Errorf("LoadTask of a task never written: found %v, %v", found, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	loaded, err := ro.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []report.Task
	if err := ro.EachTask(ctx, func(idx int, task *report.Task) error {
		if idx != len(got) {
			t.Errorf("task %d came as %d", len(got), idx)
		}
		got = append(got, *task)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, loaded.Tasks) {
		t.Fatalf("EachTask gave %+v\nLoad gave %+v", got, loaded.Tasks)
	}
	shares, err := ro.Shares(ctx)
	if err != nil || !reflect.DeepEqual(shares, map[string]int{"p1": 1, "p2": 1}) {
		t.Errorf("Shares = %v, %v", shares, err)
	}
	failed, err := ro.Failed(ctx, 5)
	if err != nil || len(failed) != 1 || !reflect.DeepEqual(*failed[0], loaded.Tasks[1]) {
		t.Errorf("Failed = %+v, %v", failed, err)
	}
	var done []string
	if err := ro.Done(ctx, func(row DoneRow) error {
		done = append(done, strconv.Itoa(row.Idx)+" "+row.Digest)
		return nil
	}); err != nil || !reflect.DeepEqual(done, []string{"0 dd", "3 ee"}) {
		t.Errorf("Done gave %v, %v", done, err)
	}
	var whole, streamed bytes.Buffer
	if err := report.Encode(&whole, loaded); err != nil {
		t.Fatal(err)
	}
	head, err := ro.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantHead := *loaded
	wantHead.Tasks = []report.Task{}
	if !reflect.DeepEqual(*head, wantHead) {
		t.Fatalf("Head = %+v\nLoad gave %+v", *head, wantHead)
	}
	if err := report.EncodeEach(&streamed, head, func(yield func(*report.Task) error) error {
		return ro.EachTask(ctx, func(_ int, task *report.Task) error { return yield(task) })
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Bytes(), streamed.Bytes()) {
		t.Fatalf("streamed report differs:\n%s\nwant\n%s", streamed.Bytes(), whole.Bytes())
	}
}

// TestStreamReport: StreamReport gives the report ReadReport reads, from
// a job database or, without one, from report.json; of a folder that
// holds neither, an error wrapping fs.ErrNotExist.
func TestStreamReport(t *testing.T) {
	ctx := context.Background()
	encoded := func(dir string) ([]byte, error) {
		var b bytes.Buffer
		err := StreamReport(ctx, dir, func(head *report.Report, each func(yield func(*report.Task) error) error) error {
			return report.EncodeEach(&b, head, each)
		})
		return b.Bytes(), err
	}
	withDB := t.TempDir()
	db := open(t, filepath.Join(withDB, FileName))
	rep := sampleReport()
	rep.Summary.Total = 1 // fewer than the tasks written: the rows count
	if err := db.PutJob(rep); err != nil {
		t.Fatal(err)
	}
	for i := range rep.Tasks {
		if err := db.PutTask(i, &rep.Tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	onlyJSON := t.TempDir()
	if err := report.Write(onlyJSON, sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{withDB, onlyJSON} {
		want, err := ReadReport(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		var whole bytes.Buffer
		if err := report.Encode(&whole, want); err != nil {
			t.Fatal(err)
		}
		got, err := encoded(dir)
		if err != nil || !bytes.Equal(got, whole.Bytes()) {
			t.Errorf("%s: StreamReport gave (%v)\n%s\nwant\n%s", dir, err, got, whole.Bytes())
		}
	}
	if _, err := encoded(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("StreamReport of an empty folder: %v", err)
	}
}

// TestAsStored: a task's record through AsStored encodes in report.json as
// the record PutTask wrote and EachTask reads back does, byte for byte.
func TestAsStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	paris := time.FixedZone("Paris", 3600)
	local := time.Date(2026, 11, 24, 11, 2, 3, 456789012, paris)
	id := "0123456-89ab-cdef-0123-4567-89ab-cdef"
	tasks := []report.Task{
		{ID: "plain", Params: json.RawMessage(`{"i":1}`), State: report.TaskDone, Peer: "n@" + id, Digest: "aa", Files: []string{"tasks/plain/data"},
			Attempts: []report.Attempt{{Peer: "n@" + id, Start: t0, End: t0.Add(time.Millisecond), Outcome: report.OutcomeOK}}},
		{ID: "nils", State: report.TaskFailed, Error: "boom", Files: []string{}},
		{ID: "empty", Params: json.RawMessage{}, State: report.TaskPending, Attempts: []report.Attempt{}, Votes: []report.Vote{}},
		{ID: "local", Params: json.RawMessage(`[1, 2]`), State: report.TaskDone, Peer: "p", PeerID: "x", Checkpoints: 3, Verdict: "v",
			Attempts: []report.Attempt{{Peer: "p", Start: local, End: time.Time{}, Outcome: report.OutcomeLost, Error: "gone", Resumed: true, Check: true, HandedOver: true}},
			Votes:    []report.Vote{{Peer: "p@" + id, Digest: "d"}, {Peer: "q", PeerID: "y", Digest: "e"}},
			Partials: []report.Partial{{Time: local, Peer: "p", Text: "both", Bytes: []byte{0xff}, Truncated: true}, {Time: t0, Peer: "p", Text: "half"}}},
	}
	for i := range tasks {
		if err := db.PutTask(i, &tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenClosed(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n := 0
	if err := ro.EachTask(ctx, func(i int, read *report.Task) error {
		n++
		want, err := report.AppendTask(nil, read)
		if err != nil {
			return err
		}
		before, _ := json.Marshal(tasks[i])
		got, err := report.AppendTask(nil, AsStored(&tasks[i]))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("task %s: through AsStored\n%s\nread back\n%s", tasks[i].ID, got, want)
		}
		if after, _ := json.Marshal(tasks[i]); !bytes.Equal(after, before) {
			t.Errorf("task %s: AsStored changed the record", tasks[i].ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(tasks) {
		t.Fatalf("read %d tasks, want %d", n, len(tasks))
	}
}
