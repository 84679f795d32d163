package node

import (
	"testing"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// sentStream records what the sender sends.
type sentStream struct {
	peerpb.Peer_WorkServer
	sent []*peerpb.FromPeer
}

func (s *sentStream) Send(m *peerpb.FromPeer) error {
	s.sent = append(s.sent, m)
	return nil
}

func result(id uint64) *peerpb.FromPeer {
	return &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: &peerpb.Result{LeaseId: id, Outcome: "ok"}}}
}

// Results queued together go out as one Results message; any other
// message ends the batch and keeps its place; a lone result goes alone.
func TestSendBatchedKeepsOrder(t *testing.T) {
	s := &session{outbox: make(chan *peerpb.FromPeer, 16)}
	partial := &peerpb.FromPeer{Msg: &peerpb.FromPeer_Partial{Partial: &peerpb.Partial{LeaseId: 4}}}
	for _, m := range []*peerpb.FromPeer{result(2), result(3), partial, result(4)} {
		s.outbox <- m
	}
	st := &sentStream{}
	if err := s.sendBatched(st, result(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.sendBatched(st, <-s.outbox); err != nil {
		t.Fatal(err)
	}
	if len(st.sent) != 3 {
		t.Fatalf("sent %d messages, want 3: %v", len(st.sent), st.sent)
	}
	b := st.sent[0].GetResults()
	if b == nil || len(b.Results) != 3 || b.Results[0].LeaseId != 1 || b.Results[2].LeaseId != 3 {
		t.Fatalf("first message %v, want Results 1,2,3", st.sent[0])
	}
	if st.sent[1].GetPartial() == nil {
		t.Fatalf("second message %v, want the partial", st.sent[1])
	}
	if r := st.sent[2].GetResult(); r == nil || r.LeaseId != 4 {
		t.Fatalf("third message %v, want Result 4 alone", st.sent[2])
	}
}

// A batch stops before it would pass maxBatchBytes; the result that does
// not fit goes alone after it.
func TestSendBatchedBoundsSize(t *testing.T) {
	s := &session{outbox: make(chan *peerpb.FromPeer, 16)}
	big := &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: &peerpb.Result{LeaseId: 2,
		Outputs: []*peerpb.Output{{Name: "data", Data: make([]byte, maxBatchBytes)}}}}}
	s.outbox <- big
	st := &sentStream{}
	if err := s.sendBatched(st, result(1)); err != nil {
		t.Fatal(err)
	}
	if len(st.sent) != 2 || st.sent[0].GetResult().GetLeaseId() != 1 || st.sent[1].GetResult().GetLeaseId() != 2 {
		t.Fatalf("sent %v, want result 1 then result 2, each alone", st.sent)
	}
}
