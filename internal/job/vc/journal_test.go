package vc

import (
	"bytes"
	"context"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// memJournal keeps what a State journals, as a Snapshot.
type memJournal struct{ s Snapshot }

func newMemJournal() *memJournal {
	return &memJournal{Snapshot{Globals: map[string]sdk.Global{}, Messages: map[string][]sdk.Message{},
		Checkpoints: map[string]Saved{}, Ops: map[string]map[int]Op{}}}
}

func (j *memJournal) Global(key string, g sdk.Global) { j.s.Globals[key] = g }
func (j *memJournal) Message(to string, m sdk.Message) {
	j.s.Messages[to] = append(j.s.Messages[to], m)
}
func (j *memJournal) Checkpoint(task string, c Saved) { j.s.Checkpoints[task] = c }
func (j *memJournal) Op(task string, n int, o Op) {
	if j.s.Ops[task] == nil {
		j.s.Ops[task] = map[int]Op{}
	}
	j.s.Ops[task][n] = o
}
func (j *memJournal) TruncateOps(task string, n int) {
	for k := range j.s.Ops[task] {
		if k >= n {
			delete(j.s.Ops[task], k)
		}
	}
}

// TestJournalRestore: a State rebuilt from its journal has the globals,
// the messages and the checkpoints back, and a task resumed from its
// checkpoint replays the operations it made after it (nothing applied
// twice).
func TestJournalRestore(t *testing.T) {
	ctx := context.Background()
	j := newMemJournal()
	v := New([]string{"a", "b"}, func(context.Context, []byte) (string, error) { return "blk", nil }, nil)
	v.SetJournal(j)
	a, _ := cursor("a")
	if _, err := v.Store(a, "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := v.Send(a, "b", []byte("m1")); err != nil {
		t.Fatal(err)
	}
	if err := v.Checkpoint(ctx, a, []byte("after 2")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Store(a, "x", []byte("2")); err != nil { // after the checkpoint
		t.Fatal(err)
	}
	if err := v.Send(a, "b", []byte("m2")); err != nil {
		t.Fatal(err)
	}

	w := New([]string{"a", "b"}, nil, nil)
	if g, m, c := w.Restore(j.s); g != 1 || m != 2 || c != 1 {
		t.Fatalf("restored %d globals, %d messages, %d checkpoints; want 1, 2, 1", g, m, c)
	}
	if j.s.Checkpoints["a"].Block != "blk" {
		t.Errorf("checkpoint block %q, want the store's", j.s.Checkpoints["a"].Block)
	}
	// Task a resumes from its checkpoint and repeats what it did after it:
	// the recorded results come back and nothing is applied again.
	a2, _ := cursor("a")
	state, ok := w.Resume(a2)
	if !ok || string(state) != "after 2" {
		t.Fatalf("resume: %q %v", state, ok)
	}
	g, err := w.Store(a2, "x", []byte("2"))
	if err != nil || g.Version != 2 {
		t.Fatalf("replayed store: %+v %v, want version 2", g, err)
	}
	if err := w.Send(a2, "b", []byte("m2")); err != nil {
		t.Fatal(err)
	}
	// b gets m1 and m2 once each.
	b, _ := cursor("b")
	for _, want := range []string{"m1", "m2"} {
		m, err := w.Recv(ctx, b)
		if err != nil || !bytes.Equal(m.Data, []byte(want)) {
			t.Fatalf("recv: %q %v, want %s", m.Data, err, want)
		}
	}
	if n := len(w.box("b").msgs); n != 2 {
		t.Fatalf("b's mailbox holds %d messages, want 2 (a replayed send was delivered again)", n)
	}
	if g, _ := w.Load(b, "x"); g.Version != 2 || string(g.Value) != "2" {
		t.Fatalf("x is %+v, want version 2", g)
	}

	// A checkpoint beyond the kept op log (a lost suffix) is dropped.
	bad := newMemJournal()
	bad.s.Checkpoints["a"] = Saved{State: []byte("s"), Pos: 5}
	if _, _, c := New([]string{"a"}, nil, nil).Restore(bad.s); c != 0 {
		t.Fatal("a checkpoint past the end of its op log was restored")
	}
}
