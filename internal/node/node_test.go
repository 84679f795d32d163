package node

import (
	"context"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/trust"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// startNode serves a node on loopback for the test's duration.
func startNode(t *testing.T, slots int) (*Node, peerpb.PeerClient) {
	return startNodeCfg(t, Config{Slots: slots})
}

func startNodeCfg(t *testing.T, cfg Config) (*Node, peerpb.PeerClient) {
	t.Helper()
	cfg.Name, cfg.DataDir, cfg.ShutdownGrace, cfg.Creds = "n-"+t.Name(), t.TempDir(), time.Second, testCreds
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	conn, err := grpc.NewClient(n.Addr(), transfer.DialOptions(testCreds.ClientTLS())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return n, peerpb.NewPeerClient(conn)
}

func goodHello() *peerpb.Hello {
	return &peerpb.Hello{
		Proto:           ProtocolVersion,
		JobId:           strings.Repeat("ab", 32),
		Coordinator:     "c",
		CoordinatorAddr: "127.0.0.1:1",
		Plugin:          &peerpb.FileRef{Name: "plugin", FileId: make([]byte, 32), Digest: make([]byte, 32)},
		PluginOs:        "linux",
		PluginArch:      "amd64",
		TimeoutMs:       1000,
	}
}

// work sends msgs on a fresh Work stream and returns the first answer.
func work(t *testing.T, c peerpb.PeerClient, msgs ...*peerpb.ToPeer) (*peerpb.FromPeer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	return s.Recv()
}

func TestInfo(t *testing.T) {
	n, c := startNode(t, 3)
	info, err := c.Info(context.Background(), &peerpb.InfoRequest{Proto: ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != n.Name() || info.Slots != 3 || info.FreeSlots != 3 || info.GrpcAddr != n.Addr() || info.Proto != ProtocolVersion {
		t.Fatalf("info %+v", info)
	}
}

func TestWorkRefusesBadHellos(t *testing.T) {
	_, c := startNode(t, 1)
	hello := func(edit func(h *peerpb.Hello)) *peerpb.ToPeer {
		h := goodHello()
		edit(h)
		return &peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: h}}
	}
	tests := []struct {
		name string
		msg  *peerpb.ToPeer
		want string
	}{
		{"protocol version", hello(func(h *peerpb.Hello) { h.Proto = 99 }), "protocol version 99"},
		{"platform", hello(func(h *peerpb.Hello) { h.PluginOs, h.PluginArch = "plan9", "mips" }), "built for plan9/mips"},
		{"job id", hello(func(h *peerpb.Hello) { h.JobId = "../../etc" }), "malformed job id"},
		{"plugin ref", hello(func(h *peerpb.Hello) { h.Plugin.FileId = []byte{1} }), "malformed plugin"},
		{"timeout", hello(func(h *peerpb.Hello) { h.TimeoutMs = -5 }), "timeout"},
		{"network", hello(func(h *peerpb.Hello) { h.Network = true }), "not started with --allow-network"},
		{"input name", hello(func(h *peerpb.Hello) {
			h.Inputs = []*peerpb.FileRef{{Name: "../x", FileId: make([]byte, 32)}}
		}), "input"},
		{"unreachable coordinator", hello(func(h *peerpb.Hello) {}), "cannot prepare the job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := work(t, c, tt.msg)
			if err != nil {
				t.Fatalf("want a Refuse, got error %v", err)
			}
			r := got.GetRefuse()
			if r == nil || !strings.Contains(r.Reason, tt.want) {
				t.Fatalf("got %v, want a Refuse containing %q", got, tt.want)
			}
		})
	}
}

func TestWorkRejectsMalformedStreams(t *testing.T) {
	_, c := startNode(t, 1)
	// A session must start with Hello.
	_, err := work(t, c, &peerpb.ToPeer{Msg: &peerpb.ToPeer_Lease{Lease: &peerpb.Lease{LeaseId: 1}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("lease before hello: %v, want InvalidArgument", err)
	}
	// An empty message.
	_, err = work(t, c, &peerpb.ToPeer{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty message: %v, want InvalidArgument", err)
	}
}

// TestStrangersRefused: a client without the swarm's certificate (none at
// all, or another swarm's) fails the handshake and reaches no service.
func TestStrangersRefused(t *testing.T) {
	n, _ := startNode(t, 1)
	foreign := trust.TestMember() // of another swarm
	blind := foreign.ClientTLS()
	blind.VerifyConnection = nil
	refused := transfer.RefusedHandshakes()
	for name, opts := range map[string][]grpc.DialOption{
		"plaintext":     {grpc.WithTransportCredentials(insecure.NewCredentials())},
		"another swarm": transfer.DialOptions(foreign.ClientTLS()),
		// One that does not check the server: the server refuses it.
		"another swarm, blind": transfer.DialOptions(blind),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient(n.Addr(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := peerpb.NewPeerClient(conn).Info(ctx, &peerpb.InfoRequest{Proto: ProtocolVersion}); status.Code(err) != codes.Unavailable {
				t.Fatalf("Info from a stranger: %v, want Unavailable (refused handshake)", err)
			}
			if s, err := peerpb.NewPeerClient(conn).Work(ctx); err == nil {
				if err := s.Send(&peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: goodHello()}}); err == nil {
					if got, err := s.Recv(); err == nil {
						t.Fatalf("a stranger's Work stream got %v", got)
					}
				}
			}
		})
	}
	if n.Stats().Sessions != 0 {
		t.Fatalf("%d sessions for strangers", n.Stats().Sessions)
	}
	if transfer.RefusedHandshakes() < refused+2 {
		t.Fatalf("the node refused %d handshakes, want at least the plaintext and the blind stranger's", transfer.RefusedHandshakes()-refused)
	}
}

// TestSubmittersNarrow: with Submitters set, a member that is not among
// them is refused, by the ID its handshake proved.
func TestSubmittersNarrow(t *testing.T) {
	someone, err := trust.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	_, c := startNodeCfg(t, Config{Slots: 1, Submitters: []trust.NodeID{someone.ID}})
	got, err := work(t, c, &peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: goodHello()}})
	if err != nil || got.GetRefuse() == nil || !strings.Contains(got.GetRefuse().Reason, "--submitters") {
		t.Fatalf("got %v, %v; want a refusal naming --submitters", got, err)
	}
}

func TestZeroSlotNodeRefusesWork(t *testing.T) {
	_, c := startNode(t, 0)
	got, err := work(t, c, &peerpb.ToPeer{Msg: &peerpb.ToPeer_Hello{Hello: goodHello()}})
	if err != nil || got.GetRefuse() == nil || !strings.Contains(got.GetRefuse().Reason, "0 slots") {
		t.Fatalf("got %v, %v", got, err)
	}
}

// The scheduler shares slots between sessions: each is granted its fair
// share plus a prefetch, and slot runners alternate between them.
func TestSchedFairShare(t *testing.T) {
	s := newSched(4, 0)
	mk := func() *session { return &session{kick: make(chan struct{}, 1)} }
	a, b := mk(), mk()
	a.ready, b.ready = true, true
	s.add(a)
	if got := a.credits.Load(); got != 6 { // 4 slots + prefetch 2
		t.Fatalf("one session: %d credits, want 6", got)
	}
	s.add(b)
	if got := b.credits.Load(); got != 3 { // share 2 + prefetch 1
		t.Fatalf("second session: %d credits, want 3", got)
	}
	// Both sessions queue work; the runners take from both in turn.
	for i := range 3 {
		s.enqueue(a, &queued{lease: &peerpb.Lease{LeaseId: uint64(i)}})
		s.enqueue(b, &queued{lease: &peerpb.Lease{LeaseId: uint64(10 + i)}})
	}
	var got []*session
	s.mu.Lock()
	for range 6 {
		sess, item := s.pickLocked(false)
		if item == nil {
			break
		}
		got = append(got, sess)
	}
	s.mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Fatalf("picks not round-robin: %v", got)
		}
	}
}

// GPU slots serve the sessions of GPU jobs only, and CPU slots the
// others; each kind's fair share counts its own slots and sessions.
func TestSchedGPUSlots(t *testing.T) {
	s := newSched(4, 2)
	mk := func(gpu bool) *session { return &session{kick: make(chan struct{}, 1), gpu: gpu, ready: true} }
	cpu, gpu := mk(false), mk(true)
	s.add(cpu)
	s.add(gpu)
	if got := cpu.credits.Load(); got != 6 { // 4 CPU slots + prefetch 2
		t.Fatalf("CPU session: %d credits, want 6", got)
	}
	if got := gpu.credits.Load(); got != 3 { // 2 GPU slots + prefetch 1
		t.Fatalf("GPU session: %d credits, want 3", got)
	}
	s.enqueue(cpu, &queued{lease: &peerpb.Lease{LeaseId: 1}, group: 1})
	s.enqueue(gpu, &queued{lease: &peerpb.Lease{LeaseId: 2}, group: 1})
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, _ := s.pickLocked(true); sess != gpu {
		t.Fatalf("a GPU slot picked a lease of %v, want the GPU session's", sess)
	}
	if sess, b := s.pickLocked(true); b != nil {
		t.Fatalf("a GPU slot picked a CPU job's lease (%v)", sess)
	}
	if sess, _ := s.pickLocked(false); sess != cpu {
		t.Fatalf("a CPU slot picked a lease of %v, want the CPU session's", sess)
	}
}

// A lease wakes an idle runner of a slot that may run it: a GPU job's
// lease, queued while every runner waits, is taken by a GPU slot although
// the CPU slots' runners have waited longer. A wake-up that went to the
// longest waiter, a CPU slot, was lost: the lease stayed queued until
// another lease came, and in a job's last tasks none came.
func TestSchedLeaseWakesItsKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(2, 2)
		gpu := &session{kick: make(chan struct{}, 1), gpu: true, ready: true}
		s.add(gpu)
		took := make(chan int, 4)
		for slot := range 4 { // the CPU slots' runners wait first
			go func() {
				if sess, _ := s.take(slot); sess != nil {
					took <- slot
				}
			}()
			synctest.Wait()
		}
		s.enqueue(gpu, &queued{lease: &peerpb.Lease{LeaseId: 1}, group: 1})
		synctest.Wait()
		select {
		case slot := <-took:
			if slot < 2 {
				t.Errorf("CPU slot %d took a GPU job's lease", slot)
			}
		default:
			t.Error("a GPU job's lease, queued while every slot's runner waited, was taken by none")
		}
		s.close()
		synctest.Wait()
	})
}
