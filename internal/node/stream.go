package node

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// pull is called by the scheduler (under its lock): it must not block.
func (s *session) pull(n int) {
	s.credits.Add(int64(n))
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sender is the only goroutine that sends on the stream.
func (s *session) sender(ctx context.Context, stream peerpb.Peer_WorkServer) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			if c := s.credits.Swap(0); c > 0 {
				if err := stream.Send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Pull{Pull: &peerpb.Pull{N: uint32(c)}}}); err != nil {
					return err
				}
			}
		case m := <-s.outbox:
			if err := s.sendBatched(stream, m); err != nil {
				return err
			}
		}
	}
}

// Batch limits are the protocol's.
const (
	maxBatch      = peerpb.MaxBatch
	maxBatchBytes = peerpb.MaxBatchBytes
)

// sendBatched sends m; if m is a result, the results queued behind it go
// in the same message, up to maxBatch and maxBatchBytes. Messages keep
// their order: anything else queued ends the batch and follows it.
func (s *session) sendBatched(stream peerpb.Peer_WorkServer, m *peerpb.FromPeer) error {
	r, ok := m.Msg.(*peerpb.FromPeer_Result)
	if !ok {
		return stream.Send(m)
	}
	batch := []*peerpb.Result{r.Result}
	size := proto.Size(r.Result)
	var next *peerpb.FromPeer
	for len(batch) < maxBatch && size < maxBatchBytes && next == nil {
		select {
		case m := <-s.outbox:
			r, ok := m.Msg.(*peerpb.FromPeer_Result)
			if !ok || size+proto.Size(r.Result) > maxBatchBytes {
				next = m // goes alone, after the batch
				break
			}
			batch = append(batch, r.Result)
			size += proto.Size(r.Result)
		default:
			next = &peerpb.FromPeer{} // nothing more queued
		}
	}
	out := m
	if len(batch) > 1 {
		out = &peerpb.FromPeer{Msg: &peerpb.FromPeer_Results{Results: &peerpb.Results{Results: batch}}}
	}
	if err := stream.Send(out); err != nil {
		return err
	}
	if phasetrace.On() {
		for _, r := range batch {
			phasetrace.Mark("p.sent", r.LeaseId)
		}
	}
	if next != nil && next.Msg != nil {
		return stream.Send(next)
	}
	return nil
}

func (s *session) send(ctx context.Context, m *peerpb.FromPeer) {
	select {
	case s.outbox <- m:
	case <-ctx.Done():
	case <-s.gone:
	}
}

// receive handles the coordinator's leases and cancels.
func (s *session) receive(ctx context.Context, stream peerpb.Peer_WorkServer, sendErr <-chan error) error {
	msgs := make(chan *peerpb.ToPeer, 64) // the reader runs ahead of the handler
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if phasetrace.On() {
				for _, l := range m.GetLeases().GetLeases() {
					phasetrace.Mark("p.recv", l.LeaseId)
				}
				if l := m.GetLease(); l != nil {
					phasetrace.Mark("p.recv", l.LeaseId)
				}
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	for {
		select {
		case err := <-sendErr:
			return err
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case m := <-msgs:
			switch x := m.Msg.(type) {
			case *peerpb.ToPeer_Lease:
				s.groupLeft = 0 // a batch never spans messages
				if err := s.admit(ctx, x.Lease); err != nil {
					return err
				}
			case *peerpb.ToPeer_Leases:
				if len(x.Leases.Leases) > maxBatch {
					return status.Errorf(codes.InvalidArgument, "work: %d leases in one message, at most %d", len(x.Leases.Leases), maxBatch)
				}
				s.groupLeft = 0
				for _, l := range x.Leases.Leases {
					if err := s.admit(ctx, l); err != nil {
						return err
					}
				}
			case *peerpb.ToPeer_Cancel:
				s.cancelLease(ctx, x.Cancel.LeaseId)
			case *peerpb.ToPeer_Acks:
				if len(x.Acks.LeaseIds)+len(x.Acks.Tasks) > peerpb.MaxAcks {
					return status.Errorf(codes.InvalidArgument, "work: %d acks in one message, at most %d", len(x.Acks.LeaseIds)+len(x.Acks.Tasks), peerpb.MaxAcks)
				}
				s.ack(x.Acks)
			case *peerpb.ToPeer_End:
				s.jobOver(x.End.State)
				return nil // the coordinator closes the stream
			case *peerpb.ToPeer_Reply:
				s.mu.Lock()
				ch := s.pending[x.Reply.CallId]
				s.mu.Unlock()
				if ch != nil {
					select {
					case ch <- x.Reply:
					default:
					}
				}
			default:
				return status.Errorf(codes.InvalidArgument, "work: unexpected message %T", m.Msg)
			}
		}
	}
}

func (s *session) admit(ctx context.Context, l *peerpb.Lease) error {
	if !taskIDRe.MatchString(l.TaskId) || len(l.Params) > maxParams || !json.Valid(l.Params) {
		return status.Errorf(codes.InvalidArgument, "work: malformed lease %d", l.LeaseId)
	}
	s.mu.Lock()
	if _, dup := s.active[l.LeaseId]; dup {
		s.mu.Unlock()
		return status.Errorf(codes.InvalidArgument, "work: duplicate lease %d", l.LeaseId)
	}
	if s.groupLeft > 0 {
		s.groupLeft-- // the batch goes on
	} else {
		s.group++
		s.groupLeft = uint64(max(l.Batch, 1)) - 1
	}
	lctx, cancel := context.WithCancel(s.base)
	it := &queued{lease: l, ctx: lctx, cancel: cancel, group: s.group, admitted: time.Now(), frozen0: sandbox.FrozenTime()}
	s.active[l.LeaseId] = it
	s.mu.Unlock()
	s.n.mu.Lock()
	s.n.stats.Leases++
	s.n.mu.Unlock()
	s.n.sched.enqueue(s, it)
	phasetrace.Mark("p.admit", l.LeaseId)
	return nil
}

func (s *session) cancelLease(ctx context.Context, id uint64) {
	s.mu.Lock()
	it := s.active[id]
	s.mu.Unlock()
	if it == nil {
		return
	}
	it.cancel()
	if s.n.sched.unqueue(s, id) {
		s.finish(it, &peerpb.Result{LeaseId: id, Outcome: report.OutcomeCanceled, Error: "canceled by the coordinator"})
	}
}

// handBack returns an unstarted lease to the coordinator.
func (s *session) handBack(it *queued, why string) {
	s.n.mu.Lock()
	s.n.stats.Handed++
	s.n.mu.Unlock()
	s.finish(it, &peerpb.Result{LeaseId: it.lease.LeaseId, Outcome: report.OutcomeLost, Error: why})
}

func (s *session) finish(it *queued, res *peerpb.Result) {
	gone := s.keepResult(it, res)
	it.cancel()
	if gone {
		return // kept for the job's next session, if worth it
	}
	// Not the lease's context: it may be canceled already, and the result
	// must still go out. The sender drains the outbox while the session
	// lives; give up after a while if it does not (the timer only then:
	// a result mostly finds room at once).
	for _, f := range s.n.forgeries(res) {
		select {
		case s.outbox <- f:
		default:
		}
	}
	m := &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: res}}
	select {
	case s.outbox <- m:
		return
	default:
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case s.outbox <- m:
	case <-s.gone:
	case <-t.C:
	}
}
