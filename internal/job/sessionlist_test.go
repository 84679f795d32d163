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
)

// TestSessionListOneWritePerBatch: enrolments while the journal is busy
// cost one marshal of the session list, not one each, and the list that
// reaches job.db holds every peer, sorted.
func TestSessionListOneWritePerBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := t.TempDir()
	r := &runner{log: slog.New(slog.DiscardHandler)}
	var err error
	if r.db, err = jobdb.Open(ctx, filepath.Join(out, jobdb.FileName), jobdb.Options{}); err != nil {
		t.Fatal(err)
	}
	defer r.db.Close()
	// Hold the writer in a batch until every peer has enrolled.
	release, busy := make(chan struct{}), make(chan struct{})
	if err := r.db.PutJobValueFunc("hold", func() string { close(busy); <-release; return "" }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the writer never committed the first batch")
	}
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

func mustValue(t *testing.T, db *jobdb.DB, key string) string {
	t.Helper()
	v, err := db.JobValue(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
