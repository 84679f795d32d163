package swarmjobs

import (
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// holdStream is a Hold call's stream: the caller's context and the
// messages it sends.
type holdStream struct {
	grpc.ServerStream
	ctx  context.Context
	recv func() (*pb.Bundle, error)
}

func (h *holdStream) Context() context.Context    { return h.ctx }
func (h *holdStream) Recv() (*pb.Bundle, error)   { return h.recv() }
func (h *holdStream) SendAndClose(*pb.Held) error { return nil }
func hold(ctx context.Context, kind string, r *pb.Record, msgs ...*pb.Bundle) *holdStream {
	head := &pb.Bundle{Msg: &pb.Bundle_Header{Header: &pb.Header{Kind: kind, Record: r}}}
	return &holdStream{ctx: ctx, recv: stream(append([]*pb.Bundle{head}, msgs...)...)}
}

// TestHoldFencing: a member refuses the copies of an owner of a lower
// epoch than its record's, and an owner that gets a copy of a higher
// epoch steps down: its coordinator stops and it holds the job.
func TestHoldFencing(t *testing.T) {
	s := testService(t, Config{})
	s.life = context.Background()
	oldCtx, oldOwner := asNode(t)
	newCtx, newOwner := asNode(t)
	id := strings.Repeat("d", 64)
	dir := s.jobDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	at := func(epoch uint64, owner string) *pb.Record {
		return &pb.Record{Id: id, Name: "j", State: StateRunning, Epoch: epoch, Owner: owner, OwnerId: map[string]string{"old": oldOwner.String(), "new": newOwner.String()}[owner]}
	}
	s.jobs[id] = &entry{rec: at(2, "new"), dir: dir, changed: make(chan struct{}), ended: make(chan struct{})}
	close(s.jobs[id].ended)
	err := s.Hold(hold(oldCtx, KindState, at(1, "old"), fileMsgs(journalFile, []byte("db"), nil)...))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), staleOwner) {
		t.Fatalf("copy of epoch 1 to a member at epoch 2: %v", err)
	}
	if _, err := os.Stat(s.jobDir(id) + "/" + stateDir); err == nil {
		t.Error("the stale copy was kept")
	}

	// This member owns the job at epoch 1; a copy of epoch 2 comes.
	ctx, cancel := context.WithCancel(context.Background())
	e := &entry{rec: at(1, "me"), dir: dir, owned: true, changed: make(chan struct{}), ended: make(chan struct{}), cancel: cancel}
	s.jobs[id] = e
	go func() { <-ctx.Done(); close(e.ended) }() // the coordinator ends when told
	if err := s.Hold(hold(newCtx, KindState, at(2, "new"), fileMsgs(journalFile, []byte("db"), nil)...)); err != nil {
		t.Fatalf("copy of epoch 2 to the owner of epoch 1: %v", err)
	}
	_, r, _ := s.get(id)
	if e.owned || !e.steppedDown || ctx.Err() == nil || r.Epoch != 2 || r.OwnerId != newOwner.String() {
		t.Errorf("after a copy of a higher epoch: owned %v, stepped down %v, coordinator stopped %v, record epoch %d owner %s", e.owned, e.steppedDown, ctx.Err() != nil, r.Epoch, r.Owner)
	}
}
