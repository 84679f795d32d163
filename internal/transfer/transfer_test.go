package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/blocks/blockstest"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transfer/transferpb"
	"github.com/p2pc/p2pc/internal/transport"
)

// peer is a Blocks server on 127.0.0.1 with its own store.
type peer struct {
	addr  string
	store *blocks.MemStore
	srv   *transfer.Server
	g     *grpc.Server
}

func startPeer(t *testing.T, store *blocks.MemStore, opts transfer.ServerOptions) *peer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	g := grpc.NewServer(transfer.GRPCServerOptions(testCreds.ServerTLS(), nil)...)
	srv := transfer.NewServer(store, opts)
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(srv.Listener(lis, transport.TCP{}, testCreds.ServerTLS()))
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return &peer{addr: lis.Addr().String(), store: store, srv: srv, g: g}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// tWriter sends log lines to t.Log, so they show only for failed tests.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func randomData(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

// putFile stores data as a file into every store and returns its ID.
func putFile(t *testing.T, data []byte, blockSize int, stores ...blocks.Store) (*blocks.Manifest, blocks.ID) {
	t.Helper()
	var m *blocks.Manifest
	var id blocks.ID
	for _, s := range stores {
		var err error
		m, id, err = blocks.PutFile(t.Context(), s, bytes.NewReader(data), blockSize)
		if err != nil {
			t.Fatal(err)
		}
	}
	return m, id
}

func readBack(t *testing.T, s blocks.Store, file blocks.ID) []byte {
	t.Helper()
	m, err := blocks.ReadManifest(t.Context(), s, file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := blocks.WriteFile(t.Context(), s, m, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func newFetcher(t *testing.T, s blocks.Store, opts transfer.FetchOptions) *transfer.Fetcher {
	pool := transfer.NewPool(nil, testCreds.ClientTLS())
	t.Cleanup(func() { _ = pool.Close() })
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	return transfer.NewFetcher(s, pool, opts)
}

type counter struct {
	total atomic.Int64
	n     atomic.Int64
	fn    func(n int64)
}

func (c *counter) SetTotal(n int64) { c.total.Store(n) }
func (c *counter) Add(n int64) {
	v := c.n.Add(n)
	if c.fn != nil {
		c.fn(v)
	}
}

func addrs(ps ...*peer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.addr)
	}
	return out
}

func checkSum(t *testing.T, st *transfer.FetchStats) {
	t.Helper()
	sum := 0
	for _, ps := range st.Peers {
		sum += ps.Blocks
	}
	if sum != st.Fetched || st.Present+st.Fetched != st.Blocks {
		t.Errorf("stats do not add up: peers served %d, fetched %d, present %d, blocks %d", sum, st.Fetched, st.Present, st.Blocks)
	}
}

func TestFetchFromThree(t *testing.T) {
	data := randomData(1, 8<<20+123)
	var ps []*peer
	var stores []blocks.Store
	for range 3 {
		s := blocks.NewMemStore()
		stores = append(stores, s)
		ps = append(ps, startPeer(t, s, transfer.ServerOptions{}))
	}
	m, file := putFile(t, data, 64<<10, stores...)
	local := blocks.NewMemStore()
	prog := &counter{}
	st, err := newFetcher(t, local, transfer.FetchOptions{BatchBytes: 64 << 10}).Fetch(t.Context(), file, addrs(ps...), prog)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, local, file); !bytes.Equal(got, data) {
		t.Fatal("fetched file differs")
	}
	if st.Blocks != len(m.Blocks) || st.Fetched != len(m.Blocks) || st.Present != 0 {
		t.Errorf("stats: %+v", st)
	}
	for _, p := range ps {
		if st.Peers[p.addr].Blocks == 0 {
			t.Errorf("peer %s served no block: %+v", p.addr, st.Peers[p.addr])
		}
	}
	checkSum(t, st)
	if prog.total.Load() != int64(len(data)) || prog.n.Load() != int64(len(data)) {
		t.Errorf("progress %d of %d, want %d", prog.n.Load(), prog.total.Load(), len(data))
	}
	t.Logf("per peer: %d %d %d", st.Peers[ps[0].addr].Blocks, st.Peers[ps[1].addr].Blocks, st.Peers[ps[2].addr].Blocks)

	// Fetching again fetches nothing.
	st, err = newFetcher(t, local, transfer.FetchOptions{}).Fetch(t.Context(), file, addrs(ps...), nil)
	if err != nil || st.Fetched != 0 || st.Present != len(m.Blocks) {
		t.Fatalf("refetch: %+v, %v", st, err)
	}
}

// TestFetchSpreads: a peer that fetched a file serves it to the next.
func TestFetchSpreads(t *testing.T) {
	data := randomData(2, 3<<20)
	src := blocks.NewMemStore()
	_, file := putFile(t, data, 256<<10, src)
	a := startPeer(t, src, transfer.ServerOptions{})
	mid := blocks.NewMemStore()
	if _, err := newFetcher(t, mid, transfer.FetchOptions{}).Fetch(t.Context(), file, []string{a.addr}, nil); err != nil {
		t.Fatal(err)
	}
	b := startPeer(t, mid, transfer.ServerOptions{})
	a.g.Stop()
	last := blocks.NewMemStore()
	st, err := newFetcher(t, last, transfer.FetchOptions{}).Fetch(t.Context(), file, []string{b.addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBack(t, last, file), data) || st.Peers[b.addr].Blocks != st.Blocks {
		t.Fatalf("stats %+v", st)
	}
}

// TestFetchLearnsHolders: blocks that appear at a peer during the fetch
// are found by the periodic Have refresh and taken from it.
func TestFetchLearnsHolders(t *testing.T) {
	data := randomData(3, 2<<20)
	full := blocks.NewMemStore()
	m, file := putFile(t, data, 128<<10, full)
	half := len(m.Blocks) / 2
	// a holds the manifest and the first half; b holds nothing at first.
	aStore, bStore := blocks.NewMemStore(), blocks.NewMemStore()
	manifest, _ := full.Get(t.Context(), file)
	_ = aStore.Put(t.Context(), file, manifest)
	for i, id := range m.Blocks {
		d, _ := full.Get(t.Context(), id)
		if i < half {
			_ = aStore.Put(t.Context(), id, d)
		}
	}
	a := startPeer(t, aStore, transfer.ServerOptions{})
	b := startPeer(t, bStore, transfer.ServerOptions{})
	time.AfterFunc(300*time.Millisecond, func() {
		for _, id := range m.Blocks[half:] {
			d, _ := full.Get(context.Background(), id)
			_ = bStore.Put(context.Background(), id, d)
		}
	})
	local := blocks.NewMemStore()
	st, err := newFetcher(t, local, transfer.FetchOptions{RefreshInterval: 100 * time.Millisecond}).
		Fetch(t.Context(), file, []string{a.addr, b.addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("differs")
	}
	if got := st.Peers[b.addr].Blocks; got != len(m.Blocks)-half {
		t.Errorf("b served %d blocks, want %d", got, len(m.Blocks)-half)
	}
	if st.Peers[a.addr].NotFound != 0 || st.Peers[b.addr].NotFound != 0 {
		t.Errorf("blocks asked of peers not known to hold them: %+v %+v", st.Peers[a.addr], st.Peers[b.addr])
	}
}

// TestFetchBadPeers: one peer of three misbehaves; the fetch succeeds from
// the others and the bad peer is banned (bad data) or deprioritised
// (stall).
func TestFetchBadPeers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts transfer.ServerOptions
		want func(*transfer.PeerStats) bool
	}{
		{"corrupt", transfer.ServerOptions{Corrupt: true}, func(ps *transfer.PeerStats) bool {
			return ps.Banned && ps.Corrupt >= 1 && ps.Blocks == 0
		}},
		{"truncate", transfer.ServerOptions{Truncate: true}, func(ps *transfer.PeerStats) bool {
			return ps.Banned && ps.Corrupt >= 1 && ps.Blocks == 0
		}},
		{"stall", transfer.ServerOptions{StallAfter: 3}, func(ps *transfer.PeerStats) bool {
			return !ps.Banned && ps.Timeouts >= 1 && ps.Blocks <= 3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomData(4, 4<<20+5)
			var stores []blocks.Store
			var ps []*peer
			for i := range 3 {
				s := blocks.NewMemStore()
				stores = append(stores, s)
				opts := transfer.ServerOptions{}
				if i == 0 {
					opts = tc.opts
				}
				ps = append(ps, startPeer(t, s, opts))
			}
			_, file := putFile(t, data, 64<<10, stores...)
			local := blocks.NewMemStore()
			st, err := newFetcher(t, local, transfer.FetchOptions{RequestTimeout: 500 * time.Millisecond, BatchBytes: 64 << 10}).
				Fetch(t.Context(), file, addrs(ps...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readBack(t, local, file), data) {
				t.Fatal("differs")
			}
			bad := st.Peers[ps[0].addr]
			if !tc.want(bad) {
				t.Errorf("bad peer stats: %+v", bad)
			}
			for _, p := range ps[1:] {
				if good := st.Peers[p.addr]; good.Banned || good.Blocks == 0 {
					t.Errorf("good peer stats: %+v", good)
				}
			}
			checkSum(t, st)
		})
	}
}

// TestFetchPeerDisappears: a peer is stopped in the middle of the fetch.
func TestFetchPeerDisappears(t *testing.T) {
	data := randomData(5, 12<<20)
	var stores []blocks.Store
	var ps []*peer
	for range 3 {
		s := blocks.NewMemStore()
		stores = append(stores, s)
		ps = append(ps, startPeer(t, s, transfer.ServerOptions{RateLimit: 4 << 20}))
	}
	_, file := putFile(t, data, 256<<10, stores...)
	var once sync.Once
	var stopped atomic.Bool
	prog := &counter{fn: func(n int64) {
		if n > int64(len(data))/4 {
			once.Do(func() {
				// Stop closes the connections and cancels the handlers
				// (waiting in the rate limiter), so it returns at once.
				ps[0].g.Stop()
				stopped.Store(true)
			})
		}
	}}
	local := blocks.NewMemStore()
	st, err := newFetcher(t, local, transfer.FetchOptions{RefreshInterval: 100 * time.Millisecond, BatchBytes: 256 << 10}).
		Fetch(t.Context(), file, addrs(ps...), prog)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("differs")
	}
	if !stopped.Load() {
		t.Fatal("peer was not stopped during the fetch")
	}
	gone := st.Peers[ps[0].addr]
	if gone.Failures == 0 {
		t.Errorf("stopped peer shows no failure: %+v", gone)
	}
	checkSum(t, st)
	t.Logf("stopped peer: %+v", gone)
}

// TestFetchResumes: blocks already held are not fetched again.
func TestFetchResumes(t *testing.T) {
	data := randomData(6, 2<<20)
	src := blocks.NewMemStore()
	m, file := putFile(t, data, 64<<10, src)
	p := startPeer(t, src, transfer.ServerOptions{})
	local := blocks.NewMemStore()
	held := 0
	for i, id := range m.Blocks {
		if i%3 == 0 {
			d, _ := src.Get(t.Context(), id)
			_ = local.Put(t.Context(), id, d)
			held++
		}
	}
	dest := filepath.Join(t.TempDir(), "out")
	st, err := newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, []string{p.addr}, nil, dest)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, data) {
		t.Error("FetchFile wrote a different file")
	}
	if st.Present != held || st.Fetched != len(m.Blocks)-held || st.ManifestFrom != p.addr {
		t.Errorf("stats %+v, want %d present", st, held)
	}
	checkSum(t, st)
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("differs")
	}
}

func TestFetchDuplicateBlocks(t *testing.T) {
	data := make([]byte, 1<<20) // sixteen identical zero blocks
	src := blocks.NewMemStore()
	_, file := putFile(t, data, 64<<10, src)
	p := startPeer(t, src, transfer.ServerOptions{})
	local := blocks.NewMemStore()
	prog := &counter{}
	dest := filepath.Join(t.TempDir(), "out")
	st, err := newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, []string{p.addr}, prog, dest)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, data) {
		t.Error("FetchFile wrote a different file")
	}
	if st.Blocks != 1 || st.Fetched != 1 || prog.n.Load() != int64(len(data)) {
		t.Errorf("stats %+v, progress %d", st, prog.n.Load())
	}
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("differs")
	}
}

func TestFetchNoHolder(t *testing.T) {
	data := randomData(7, 1<<20)
	src := blocks.NewMemStore()
	m, file := putFile(t, data, 64<<10, src)
	// The peer holds the manifest and all but one block.
	partial := blocks.NewMemStore()
	manifest, _ := src.Get(t.Context(), file)
	_ = partial.Put(t.Context(), file, manifest)
	for _, id := range m.Blocks[1:] {
		d, _ := src.Get(t.Context(), id)
		_ = partial.Put(t.Context(), id, d)
	}
	p := startPeer(t, partial, transfer.ServerOptions{})
	opts := transfer.FetchOptions{GiveUp: 500 * time.Millisecond, RefreshInterval: 100 * time.Millisecond}
	st, err := newFetcher(t, blocks.NewMemStore(), opts).Fetch(t.Context(), file, []string{p.addr}, nil)
	if !errors.Is(err, transfer.ErrNoHolder) {
		t.Fatalf("err = %v, want ErrNoHolder", err)
	}
	if st.Fetched != len(m.Blocks)-1 {
		t.Errorf("fetched %d, want %d", st.Fetched, len(m.Blocks)-1)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newFetcher(t, blocks.NewMemStore(), opts).FetchFile(t.Context(), file, []string{p.addr}, nil, dest); !errors.Is(err, transfer.ErrNoHolder) {
		t.Fatalf("FetchFile err = %v, want ErrNoHolder", err)
	}
	if got, _ := os.ReadFile(dest); string(got) != "old" {
		t.Errorf("failed FetchFile changed dest to %d bytes", len(got))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Nobody holds the file at all; one peer is not even listening.
	empty := startPeer(t, blocks.NewMemStore(), transfer.ServerOptions{})
	_, err = newFetcher(t, blocks.NewMemStore(), opts).Fetch(t.Context(), blocks.Sum([]byte("nope")), []string{empty.addr, "127.0.0.1:1"}, nil)
	if !errors.Is(err, transfer.ErrNoHolder) {
		t.Fatalf("err = %v, want ErrNoHolder", err)
	}
	// A block that is not a manifest.
	_, err = newFetcher(t, blocks.NewMemStore(), opts).Fetch(t.Context(), m.Blocks[2], []string{p.addr}, nil)
	if !errors.Is(err, transfer.ErrNotManifest) {
		t.Fatalf("err = %v, want ErrNotManifest", err)
	}
}

func TestFetchCancelled(t *testing.T) {
	data := randomData(8, 4<<20)
	src := blocks.NewMemStore()
	_, file := putFile(t, data, 64<<10, src)
	p := startPeer(t, src, transfer.ServerOptions{RateLimit: 1 << 20})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	st, err := newFetcher(t, blocks.NewMemStore(), transfer.FetchOptions{}).Fetch(ctx, file, []string{p.addr}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if st.Peers[p.addr].Failures != 0 || st.Peers[p.addr].Banned {
		t.Errorf("cancellation counted against the peer: %+v", st.Peers[p.addr])
	}
}

// TestServerHostile: malformed requests are refused with InvalidArgument
// and the server keeps serving.
func TestServerHostile(t *testing.T) {
	src := blocks.NewMemStore()
	id, data := blockstest.Block(1, 1000)
	_ = src.Put(t.Context(), id, data)
	p := startPeer(t, src, transfer.ServerOptions{})
	// A client that does not hold itself to the protocol's limits.
	pool := transfer.NewPool(nil, testCreds.ClientTLS(), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	defer pool.Close()
	c, err := pool.Blocks(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(n, size int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = make([]byte, size)
		}
		return out
	}
	getErr := func(req *transferpb.GetRequest) error {
		s, err := c.Get(t.Context(), req)
		if err != nil {
			return err
		}
		for {
			if _, err := s.Recv(); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"have none", func() error { _, err := c.Have(t.Context(), &transferpb.HaveRequest{}); return err }(), codes.InvalidArgument},
		{"have short id", func() error {
			_, err := c.Have(t.Context(), &transferpb.HaveRequest{Ids: ids(1, 31)})
			return err
		}(), codes.InvalidArgument},
		{"have too many", func() error {
			_, err := c.Have(t.Context(), &transferpb.HaveRequest{Ids: ids(transfer.MaxHaveIDs+1, 32)})
			return err
		}(), codes.InvalidArgument},
		{"have future version", func() error {
			_, err := c.Have(t.Context(), &transferpb.HaveRequest{Version: 99, Ids: ids(1, 32)})
			return err
		}(), codes.FailedPrecondition},
		{"get none", getErr(&transferpb.GetRequest{}), codes.InvalidArgument},
		{"get long id", getErr(&transferpb.GetRequest{Ids: append(ids(3, 32), make([]byte, 33))}), codes.InvalidArgument},
		{"get too many", getErr(&transferpb.GetRequest{Ids: ids(transfer.MaxGetIDs+1, 32)}), codes.InvalidArgument},
		{"get huge request", getErr(&transferpb.GetRequest{Ids: ids(1, transfer.MaxMessageSize+1)}), codes.ResourceExhausted},
	} {
		if got := status.Code(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// Still serving, and missing blocks are answered, not skipped.
	missing := blocks.Sum([]byte("missing"))
	s, err := c.Get(t.Context(), &transferpb.GetRequest{Version: transfer.ProtocolVersion, Ids: [][]byte{missing[:], id[:]}})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := s.Recv()
	if err != nil || m1.GetStatus() != transferpb.Block_NOT_FOUND || !bytes.Equal(m1.GetId(), missing[:]) {
		t.Fatalf("first answer %v, %v", m1, err)
	}
	m2, err := s.Recv()
	if err != nil || m2.GetStatus() != transferpb.Block_OK || !bytes.Equal(m2.GetData(), data) {
		t.Fatalf("second answer %v, %v", m2, err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
	has, err := transfer.Have(t.Context(), c, []blocks.ID{missing, id, id})
	if err != nil || has[0] || !has[1] || !has[2] {
		t.Fatalf("Have = %v, %v", has, err)
	}
}

func TestHaveSplitsLargeQuestions(t *testing.T) {
	src := blocks.NewMemStore()
	var ids []blocks.ID
	for i := range transfer.MaxHaveIDs*2 + 10 {
		id, d := blockstest.Block(uint64(i), 8)
		if i%7 == 0 {
			_ = src.Put(t.Context(), id, d)
		}
		ids = append(ids, id)
	}
	p := startPeer(t, src, transfer.ServerOptions{})
	pool := transfer.NewPool(nil, testCreds.ClientTLS())
	defer pool.Close()
	c, _ := pool.Blocks(p.addr)
	has, err := transfer.Have(t.Context(), c, ids)
	if err != nil || len(has) != len(ids) {
		t.Fatal(err)
	}
	for i, h := range has {
		if h != (i%7 == 0) {
			t.Fatalf("has[%d] = %v", i, h)
		}
	}
}

// remoteView runs the conformance suite against RemoteStore: Has and Get
// go over gRPC to a server of a MemStore; Put, Delete and List, which the
// protocol does not carry, go to that MemStore directly.
type remoteView struct {
	*transfer.RemoteStore
	backing *blocks.MemStore
}

func (v remoteView) Put(ctx context.Context, id blocks.ID, data []byte) error {
	return v.backing.Put(ctx, id, data)
}
func (v remoteView) Delete(ctx context.Context, id blocks.ID) error { return v.backing.Delete(ctx, id) }
func (v remoteView) List(ctx context.Context, fn func(blocks.ID, int64) error) error {
	return v.backing.List(ctx, fn)
}

func TestRemoteStoreConformance(t *testing.T) {
	blockstest.TestStore(t, func(t *testing.T) blocks.Store {
		backing := blocks.NewMemStore()
		p := startPeer(t, backing, transfer.ServerOptions{})
		pool := transfer.NewPool(nil, testCreds.ClientTLS())
		t.Cleanup(func() { _ = pool.Close() })
		r, err := transfer.NewRemoteStore(pool, p.addr)
		if err != nil {
			t.Fatal(err)
		}
		return remoteView{RemoteStore: r, backing: backing}
	})
}

func TestRemoteStore(t *testing.T) {
	backing := blocks.NewMemStore()
	id, data := blockstest.Block(1, 5000)
	_ = backing.Put(t.Context(), id, data)
	good := startPeer(t, backing, transfer.ServerOptions{})
	bad := startPeer(t, backing, transfer.ServerOptions{Corrupt: true})
	pool := transfer.NewPool(nil, testCreds.ClientTLS())
	defer pool.Close()
	r, _ := transfer.NewRemoteStore(pool, good.addr)
	if err := r.Put(t.Context(), id, data); !errors.Is(err, transfer.ErrReadOnly) {
		t.Errorf("Put: %v", err)
	}
	if err := r.Delete(t.Context(), id); !errors.Is(err, transfer.ErrReadOnly) {
		t.Errorf("Delete: %v", err)
	}
	if err := r.List(t.Context(), nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List: %v", err)
	}
	rb, _ := transfer.NewRemoteStore(pool, bad.addr)
	if _, err := rb.Get(t.Context(), id); !errors.Is(err, blocks.ErrCorrupt) {
		t.Errorf("Get from corrupting peer: %v, want ErrCorrupt", err)
	}
}
