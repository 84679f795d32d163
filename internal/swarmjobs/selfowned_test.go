package swarmjobs

import (
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

func TestIsRunNode(t *testing.T) {
	for name, want := range map[string]bool{
		"vm-run-4058": true, "host-a-run-1": true,
		"vm": false, "vm-run-": false, "vm-run-12a": false, "run-runner": false, "t0": false,
	} {
		if got := IsRunNode(name); got != want {
			t.Errorf("IsRunNode(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestHoldEnded: a plain run's end (kind ended) from its owner makes a
// holder forget the job, folder and all; an end of a lower epoch than
// the holder's record (the job was taken over) is refused and forgets
// nothing; a member owning the job itself refuses it.
func TestHoldEnded(t *testing.T) {
	s := testService(t, Config{})
	s.life = context.Background()
	runCtx, run := asNode(t)
	id := strings.Repeat("e", 64)
	held := func(epoch uint64, owned bool) *entry {
		dir := s.jobDir(id)
		if err := os.MkdirAll(dir+"/"+stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		e := &entry{rec: &pb.Record{Id: id, Name: "j", State: StateRunning, Epoch: epoch, Owner: "vm-run-1", OwnerId: run.String()}, dir: dir, owned: owned,
			changed: make(chan struct{}), ended: make(chan struct{})}
		close(e.ended)
		s.jobs[id] = e
		return e
	}
	end := &pb.Record{Id: id, Name: "j", State: StateComplete, Epoch: 1, Owner: "vm-run-1", OwnerId: run.String()}

	held(2, false)
	if err := s.Hold(hold(runCtx, KindEnded, end)); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), staleOwner) {
		t.Errorf("end of epoch 1 to a holder at epoch 2: %v", err)
	}
	if _, _, ok := s.get(id); !ok || !exists(s.jobDir(id)) {
		t.Fatal("a stale end made the holder forget the job")
	}

	held(1, true)
	if err := s.Hold(hold(runCtx, KindEnded, end)); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("end to a member owning the job: %v", err)
	}

	held(1, false)
	if err := s.Hold(hold(runCtx, KindEnded, end)); err != nil {
		t.Fatalf("end of the job from its owner: %v", err)
	}
	if _, _, ok := s.get(id); ok || exists(s.jobDir(id)) {
		t.Error("the holder still keeps the job after its end")
	}
	// Not the owner: refused.
	otherCtx, _ := asNode(t)
	held(1, false)
	if err := s.Hold(hold(otherCtx, KindEnded, end)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("end from another node: %v", err)
	}
}
