package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyHotJournal: a run SIGKILLed in the first commit of its job
// database (before the switch to WAL) leaves the file and a hot rollback
// journal. A read-only open (p2pc status, report) cannot roll it back;
// nothing was committed, so it reads as a job database not made yet
// (fs.ErrNotExist), and says why.
func TestReadOnlyHotJournal(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	sdb, err := sql.Open("sqlite", "file:"+live+"?_pragma=journal_mode(DELETE)&_pragma=cache_size(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	sdb.SetMaxOpenConns(1)
	ctx := context.Background()
	// A committed first page, as SQLite writes when it makes the file.
	if _, err := sdb.ExecContext(ctx, "CREATE TABLE t (x BLOB)"); err != nil {
		t.Fatal(err)
	}
	tx, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Enough pages to spill out of a one-page cache into the file, so the
	// journal is hot while the transaction is open.
	for range 64 {
		if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (randomblob(4000))"); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(live + "-journal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no hot journal to copy: %v", err)
	}
	// The files as a SIGKILL at this moment leaves them.
	killed := filepath.Join(dir, "job.db")
	for _, suffix := range []string{"", "-journal"} {
		b, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(killed+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = OpenReadOnly(ctx, killed)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "journal") {
		t.Fatalf("read-only open of a database killed in its first commit: %v, want fs.ErrNotExist naming the journal", err)
	}
}
