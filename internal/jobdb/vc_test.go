package jobdb

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// TestMigrateV1: a job database of schema 1 (no shared state, no
// attempts.handed_over) opens as the current schema with what it held, and
// its shared state reads as empty before and keeps what is written after;
// a handed-over attempt written after the migration reads back as one.
func TestMigrateV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	schemaTarget = 1
	db := open(t, path)
	schemaTarget = SchemaVersion
	want := sampleReport()
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

	// Read as it is (read-only opens migrate nothing).
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Version(ctx); err != nil || v != 1 {
		t.Fatalf("made version %d (%v), want 1", v, err)
	}
	if s, err := ro.ReadVC(ctx); err != nil || len(s.Globals)+len(s.Messages)+len(s.Checkpoints)+len(s.Ops) != 0 {
		t.Fatalf("schema 1 shared state: %+v, %v", s, err)
	}
	ro.Close()

	db = open(t, path)
	if v, err := db.Version(ctx); err != nil || v != SchemaVersion {
		t.Fatalf("migrated to version %d (%v), want %d", v, err, SchemaVersion)
	}
	var steps int
	if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM schema_version").Scan(&steps); err != nil || steps != SchemaVersion {
		t.Fatalf("schema_version has %d rows (%v), want one per version", steps, err)
	}
	got, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.Marshal(got)
		t.Fatalf("the migration changed the job's records: %s", a)
	}
	writeVC(t, db)
	c := &want.Tasks[1]
	c.Attempts = append(c.Attempts, report.Attempt{Peer: "p2", Start: c.Attempts[0].Start, End: c.Attempts[0].End, Outcome: report.OutcomeOK, HandedOver: true})
	if err := db.PutTask(1, c); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path)
	defer db.Close()
	checkVC(t, db)
	got, err = db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Tasks[1].Attempts; len(a) != 2 || a[0].HandedOver || !a[1].HandedOver {
		t.Fatalf("attempts after the migration: %+v", a)
	}
}

func writeVC(t *testing.T, db *DB) {
	t.Helper()
	for _, err := range []error{
		db.PutVCGlobal("counter", 1, []byte{1}),
		db.PutVCGlobal("counter", 2, []byte{2}),
		db.PutVCGlobal("empty", 1, nil),
		db.PutVCMessage("b", VCMessage{Seq: 1, Sender: "a", Data: []byte("hi")}),
		db.PutVCMessage("b", VCMessage{Seq: 2, Sender: "c", Data: nil}),
		db.PutVCOp("a", 0, VCOp{Op: "store", Key: "counter", OK: true, Version: 1, Value: []byte{1}}),
		db.PutVCOp("a", 1, VCOp{Op: "cas", Key: "counter", Version: 1, Value: []byte{1}}),
		db.PutVCOp("a", 2, VCOp{Op: "send", Key: "b", Error: "full"}),
		db.TruncateVCOps("a", 1),                                                           // an attempt diverged at entry 1 ...
		db.PutVCOp("a", 1, VCOp{Op: "load", Key: "counter", Version: 2, Value: []byte{2}}), // ... and went on live
		db.PutVCCheckpoint("a", VCCheckpoint{Seq: 0, Pos: 1, Time: t0, Block: "blk", State: []byte("s1")}),
		db.PutVCCheckpoint("a", VCCheckpoint{Seq: 0, Pos: 2, Time: t0, Block: "blk2", State: []byte("s2")}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkVC(t *testing.T, db *DB) {
	t.Helper()
	s, err := db.ReadVC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// An empty value reads back as nil.
	want := &VCState{
		Globals: map[string]VCGlobal{"counter": {2, []byte{2}}, "empty": {1, nil}},
		Messages: map[string][]VCMessage{"b": {
			{Seq: 1, Sender: "a", Data: []byte("hi")}, {Seq: 2, Sender: "c"}}},
		Checkpoints: map[string]VCCheckpoint{"a": {Seq: 0, Pos: 2, Time: t0, Block: "blk2", State: []byte("s2")}},
		Ops: map[string]map[int]VCOp{"a": {
			0: {Op: "store", Key: "counter", OK: true, Version: 1, Value: []byte{1}},
			1: {Op: "load", Key: "counter", Version: 2, Value: []byte{2}}}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("shared state read back:\n%+v\nwant\n%+v", s, want)
	}
}

// TestVCRoundTrip: the shared state written to a new database reads back.
func TestVCRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	writeVC(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkVC(t, db)
}
