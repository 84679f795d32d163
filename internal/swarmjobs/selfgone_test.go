package swarmjobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// TestSelfOwnedHoldersAllGone: a plain run whose holders have all left
// the membership gets ErrNoHolders from Replicate (its journal counts as
// durable on its own disk, so job's lease gate does not stop the run)
// and forgets them, so that the job is placed anew.
func TestSelfOwnedHoldersAllGone(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "snap.db")
	if err := os.WriteFile(snap, []byte("db"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := NewSelfOwned(SelfOwnedConfig{
		Self:    Member{Name: "vm-run-1", ID: "self"},
		Members: func() []Member { return nil }, // both holders left
		After:   time.Hour,                      // no placement during the test
	}, &pb.Record{Id: strings.Repeat("f", 64), Name: "j"}, nil, filepath.Join(dir, "out"))
	o.rec.Holders = []string{"a", "b"}
	err := o.Replicate(context.Background(), snap)
	if !errors.Is(err, ErrNoHolders) {
		t.Fatalf("Replicate with every holder gone: %v, want ErrNoHolders", err)
	}
	if h := o.Record().Holders; len(h) != 0 {
		t.Errorf("holders %v kept after they all left", h)
	}
}
