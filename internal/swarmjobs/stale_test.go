package swarmjobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// TestSteppedDownServesNoStaleOutput: an owner cut off while the other
// side ran the job to its end steps down when it meets the later owner's
// ended record; the output folder it wrote at the losing epoch goes, so
// it does not offer it as the job's output (List's results, Fetch).
func TestSteppedDownServesNoStaleOutput(t *testing.T) {
	s := testService(t, Config{})
	s.life = context.Background()
	_, newOwner := asNode(t)
	id := strings.Repeat("e", 64)
	dir := s.jobDir(id)
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(filepath.Join(out, "tasks", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, journalFile), []byte("the losing side's journal"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &entry{rec: &pb.Record{Id: id, Name: "j", State: StateRunning, Epoch: 1, Owner: "me", OwnerId: s.cfg.ID.String()},
		dir: dir, owned: true, changed: make(chan struct{}), ended: make(chan struct{}), cancel: cancel}
	s.jobs[id] = e
	go func() { <-ctx.Done(); close(e.ended) }() // the coordinator ends when told

	ended := &pb.Record{Id: id, Name: "j", State: StateComplete, Epoch: 2, Owner: "new", OwnerId: newOwner.String(), Done: 10, Total: 10}
	s.stepDown(e, ended)
	_, r, _ := s.get(id)
	if e.owned || r.Epoch != 2 || r.State != StateComplete {
		t.Fatalf("after stepping down: owned %v, record epoch %d %s", e.owned, r.Epoch, r.State)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the output folder written at the losing epoch is still there")
	}
	if r.Results {
		t.Error("the member that stepped down offers its output folder of the losing epoch as the job's output")
	} else if err := s.Fetch(&pb.JobRef{Id: id}, nil); err == nil {
		t.Error("Fetch of the stale output did not fail")
	}
}
