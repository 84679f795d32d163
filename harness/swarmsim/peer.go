package swarmsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"
)

// unjoinable is the gossip address every light peer gives in Info: a
// coordinator asks a static peer for one before it enrols it, and a
// light peer gossips nowhere. Nothing listens on port 1 of loopback, so
// the submitter's attempt to join it fails at once (and, all peers
// naming the same address, once per round).
const unjoinable = "127.0.0.1:1"

// emptyDigest is the digest of a task output with no file at all, the
// one a no-op task returns.
var emptyDigest = outputs.DigestInline(nil)

// peer is one light peer: the Peer protocol's Info and Work over mutual
// TLS with an identity of its own, tasks that wait TaskTime and return
// nothing.
type peer struct {
	name  string
	slots int
	task  time.Duration
	log   *slog.Logger

	lis  net.Listener
	srv  *grpc.Server
	addr string

	firstHello atomic.Int64 // unix nanoseconds of the first Hello, 0 until then
	// silent, if set, holds every Info call until it is closed; gaveUp is
	// when the first such call was given up by its caller (0: none).
	silent     atomic.Pointer[chan struct{}]
	gaveUp     atomic.Int64
	firstLease atomic.Int64 // unix nanoseconds of the first lease, 0 until then
	lastResult atomic.Int64 // unix nanoseconds of the last result sent
	tasks      atomic.Int64 // results sent
	sessions   atomic.Int64 // Work sessions opened
	errs       errList
}

// errList keeps the first errors of a peer's sessions.
type errList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 4 {
		l.errs = append(l.errs, err)
	}
}

func (l *errList) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// newPeer makes a light peer of swarm secret s with a fresh identity,
// listening on loopback; with a latency, each of its writes waits that
// long first (a link's latency).
func newPeer(s trust.Secret, name string, slots int, task, latency time.Duration, log *slog.Logger) (*peer, error) {
	id, err := trust.NewIdentity()
	if err != nil {
		return nil, fmt.Errorf("light peer %s: identity: %w", name, err)
	}
	creds, err := trust.NewCreds(s, id)
	if err != nil {
		return nil, fmt.Errorf("light peer %s: credentials: %w", name, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("light peer %s: listen: %w", name, err)
	}
	p := &peer{name: name, slots: slots, task: task, log: log.With("peer", name), lis: lis, addr: lis.Addr().String()}
	if latency > 0 {
		p.lis = slowListener{Listener: lis, delay: latency}
	}
	p.srv = grpc.NewServer(transfer.GRPCServerOptions(creds.ServerTLS(), log)...)
	peerpb.RegisterPeerServer(p.srv, &peerService{p: p})
	return p, nil
}

func (p *peer) serve() {
	if err := p.srv.Serve(p.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		p.errs.add(fmt.Errorf("light peer %s: serve: %w", p.name, err))
	}
}

// peerService is the Peer protocol of a light peer.
type peerService struct {
	peerpb.UnimplementedPeerServer
	p *peer
}

func (s *peerService) Info(ctx context.Context, _ *peerpb.InfoRequest) (*peerpb.InfoResponse, error) {
	p := s.p
	if silent := p.silent.Load(); silent != nil {
		select {
		case <-*silent:
		case <-ctx.Done():
			p.gaveUp.CompareAndSwap(0, time.Now().UnixNano())
			return nil, ctx.Err()
		}
	}
	return &peerpb.InfoResponse{Proto: peerpb.ProtocolVersion, Name: p.name, Version: "swarmsim", Os: runtime.GOOS, Arch: runtime.GOARCH,
		Slots: uint32(p.slots), FreeSlots: uint32(p.slots), GossipAddr: unjoinable, GrpcAddr: p.addr}, nil
}

// Work answers Hello with Welcome and, as a node does, credits for every
// slot plus a prefetch of half as many (at least one); it runs each
// credit's leases (one lease, or a batch) in one slot when one is free,
// and answers them with empty ok results and one more credit; Cancel answers the lease
// at once as canceled; End ends the session.
func (s *peerService) Work(stream peerpb.Peer_WorkServer) error {
	p := s.p
	p.sessions.Add(1)
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return fmt.Errorf("light peer %s: first message %T, want Hello", p.name, first.Msg)
	}
	p.firstHello.CompareAndSwap(0, time.Now().UnixNano())
	ses := &simSession{p: p, stream: stream, canceled: map[uint64]bool{}, slots: make(chan struct{}, p.slots)}
	if hello.Proto != peerpb.ProtocolVersion {
		return ses.send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Refuse{Refuse: &peerpb.Refuse{Reason: fmt.Sprintf("protocol version %d is not spoken here", hello.Proto)}}})
	}
	if err := ses.send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Welcome{Welcome: &peerpb.Welcome{Name: p.name, Slots: uint32(p.slots), Acks: true}}}); err != nil {
		return err
	}
	if err := ses.send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Pull{Pull: &peerpb.Pull{N: uint32(p.slots + max(1, p.slots/2))}}}); err != nil {
		return err
	}
	ctx := stream.Context()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			p.errs.add(fmt.Errorf("light peer %s: receive: %w", p.name, err))
			return err
		}
		var leases []*peerpb.Lease
		switch m := msg.Msg.(type) {
		case *peerpb.ToPeer_Lease:
			leases = []*peerpb.Lease{m.Lease}
		case *peerpb.ToPeer_Leases:
			leases = m.Leases.Leases
		case *peerpb.ToPeer_Cancel:
			ses.cancel(m.Cancel.LeaseId)
			continue
		case *peerpb.ToPeer_End:
			return nil
		default: // Acks: a light peer keeps nothing to forget
			continue
		}
		p.firstLease.CompareAndSwap(0, time.Now().UnixNano())
		for len(leases) > 0 {
			k := min(max(int(leases[0].Batch), 1), len(leases))
			batch := leases[:k]
			leases = leases[k:]
			wg.Add(1)
			go func() {
				defer wg.Done()
				ses.run(ctx, batch)
			}()
		}
	}
}

// simSession is one Work session of a light peer.
type simSession struct {
	p      *peer
	stream peerpb.Peer_WorkServer

	slots chan struct{} // a token per running credit

	mu       sync.Mutex // guards canceled and the stream's sending side
	canceled map[uint64]bool
}

func (s *simSession) send(m *peerpb.FromPeer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(m)
}

func (s *simSession) cancel(id uint64) {
	s.mu.Lock()
	s.canceled[id] = true
	s.mu.Unlock()
}

// run runs one credit's leases one after the other in one slot, then
// sends their results and the credit back.
func (s *simSession) run(ctx context.Context, batch []*peerpb.Lease) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return
	}
	results := make([]*peerpb.Result, 0, len(batch))
	for _, l := range batch {
		start := time.Now()
		if s.p.task > 0 {
			t := time.NewTimer(s.p.task)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		res := &peerpb.Result{LeaseId: l.LeaseId, Outcome: report.OutcomeOK, Digest: emptyDigest[:],
			StartedUnixNano: start.UnixNano(), EndedUnixNano: time.Now().UnixNano()}
		s.mu.Lock()
		if s.canceled[l.LeaseId] {
			res.Outcome, res.Error, res.Digest = report.OutcomeCanceled, "canceled by the coordinator", nil
			delete(s.canceled, l.LeaseId)
		}
		s.mu.Unlock()
		results = append(results, res)
	}
	s.p.tasks.Add(int64(len(results)))
	var out *peerpb.FromPeer
	if len(results) == 1 {
		out = &peerpb.FromPeer{Msg: &peerpb.FromPeer_Result{Result: results[0]}}
	} else {
		out = &peerpb.FromPeer{Msg: &peerpb.FromPeer_Results{Results: &peerpb.Results{Results: results}}}
	}
	if err := s.send(out); err != nil {
		return // the session ended; the coordinator requeues the leases
	}
	for now := time.Now().UnixNano(); ; {
		if old := s.p.lastResult.Load(); old >= now || s.p.lastResult.CompareAndSwap(old, now) {
			break
		}
	}
	_ = s.send(&peerpb.FromPeer{Msg: &peerpb.FromPeer_Pull{Pull: &peerpb.Pull{N: 1}}})
}
