package node

import (
	"context"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/transport/transporttest"
)

// TestPeerOverMemTransport: a node listens on an address of a transport
// that a test registers (in memory: no socket), advertises it with its
// scheme, and answers the peer protocol over it through a Pool of the
// same registry.
func TestPeerOverMemTransport(t *testing.T) {
	reg := transport.Default()
	mem := transporttest.NewMem()
	reg.Register(transporttest.Scheme, mem)
	n, err := New(Config{Name: "mem-peer", Slots: 2, DataDir: t.TempDir(), ShutdownGrace: time.Second, Creds: testCreds, Listen: "mem://peer", Transports: reg})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	if n.Addr() != "mem://peer" {
		t.Fatalf("node advertises %q, want mem://peer", n.Addr())
	}
	pool := transfer.NewPool(reg, testCreds.ClientTLS())
	defer pool.Close()
	conn, err := pool.Conn(n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	info, err := peerpb.NewPeerClient(conn).Info(ctx, &peerpb.InfoRequest{Proto: ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	if info.GrpcAddr != "mem://peer" || info.Slots != 2 {
		t.Fatalf("info %+v", info)
	}
	if mem.Dials.Load() == 0 {
		t.Fatal("no dial went through the mem transport")
	}
}
