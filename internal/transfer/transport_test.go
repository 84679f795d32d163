package transfer

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/transport/transporttest"
)

// TestFetchOverMemTransport: the Blocks service and a Fetcher work over a
// transport that a test registers (in memory: no socket), and the bulk
// path, a capability that transport lacks, is neither advertised nor
// dialed: every block comes over gRPC.
func TestFetchOverMemTransport(t *testing.T) {
	reg := transport.Default()
	mem := transporttest.NewMem()
	reg.Register(transporttest.Scheme, mem)
	const addr = "mem://blocks"

	src := blocks.NewMemStore()
	data := randomBytes(2, 1<<20+7)
	_, file, err := blocks.PutFile(t.Context(), src, bytes.NewReader(data), 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	tr, name, err := reg.Lookup(addr)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tr.Listen(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions(testCreds.ServerTLS(), nil)...)
	srv := NewServer(src, ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(srv.Listener(lis, tr, testCreds.ServerTLS()))
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})

	pool := NewPool(reg, testCreds.ClientTLS())
	t.Cleanup(func() { pool.Close() })
	local := blocks.NewMemStore()
	st, err := NewFetcher(local, pool, FetchOptions{Logger: slog.New(slog.DiscardHandler)}).Fetch(t.Context(), file, []string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := blocks.ReadManifest(t.Context(), local, file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := blocks.WriteFile(t.Context(), local, m, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("fetched file differs (err %v)", err)
	}
	if st.Fetched == 0 || st.Peers[addr].Blocks != st.Fetched {
		t.Errorf("stats %+v: want every block from %s", st, addr)
	}
	if mem.Dials.Load() == 0 {
		t.Error("no dial went through the mem transport")
	}
	if srv.bulk.Load() || srv.bulkServed.Load() != 0 || pool.bulkPeer(addr) != nil {
		t.Errorf("bulk path used on a transport without the capability: advertised %v, served %d", srv.bulk.Load(), srv.bulkServed.Load())
	}
}

// TestPoolUnknownScheme: a target whose scheme no transport serves fails
// at once, naming the scheme.
func TestPoolUnknownScheme(t *testing.T) {
	pool := NewPool(nil, testCreds.ClientTLS())
	defer pool.Close()
	_, err := pool.Conn("quic://10.0.0.1:7000")
	if !errors.Is(err, transport.ErrUnknownScheme) {
		t.Fatalf("err %v, want ErrUnknownScheme", err)
	}
	if pool.bulkPeer("quic://10.0.0.1:7000") != nil {
		t.Fatal("bulk state for a target of an unknown scheme")
	}
}
