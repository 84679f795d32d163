package transfer_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
)

func openDisk(t *testing.T, dir string) *blocks.DiskStore {
	t.Helper()
	s, err := blocks.OpenDisk(dir, blocks.DiskOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestFetchDiskBatches: Fetch into a disk store writes block files in
// committed batches; progress and stats count committed blocks.
func TestFetchDiskBatches(t *testing.T) {
	data := randomData(20, 5<<20+123)
	src := blocks.NewMemStore()
	m, file := putFile(t, data, 64<<10, src)
	p := startPeer(t, src, transfer.ServerOptions{})
	local := openDisk(t, t.TempDir())
	prog := &counter{}
	st, err := newFetcher(t, local, transfer.FetchOptions{CommitBytes: 1 << 20}).Fetch(t.Context(), file, []string{p.addr}, prog)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fetched != len(m.Blocks) || prog.n.Load() != int64(len(data)) {
		t.Errorf("stats %+v, progress %d", st, prog.n.Load())
	}
	checkSum(t, st)
	vs, err := local.Verify(t.Context())
	if err != nil || vs.Blocks != len(m.Blocks)+1 || len(vs.Corrupt) != 0 {
		t.Fatalf("Verify = %+v, %v", vs, err)
	}
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("differs")
	}
}

// TestFetchFileInPlace: FetchFile into a disk store on dest's file system
// writes each block once, into a whole file of the store linked to dest;
// blocks the store held are copied in; a second FetchFile links the whole
// file again without fetching.
func TestFetchFileInPlace(t *testing.T) {
	data := randomData(21, 3<<20+5)
	data = append(data, data[:1<<20]...) // blocks that repeat
	srcStore := openDisk(t, t.TempDir())
	m, file := putFile(t, data, 256<<10, srcStore)
	p := startPeer2(t, srcStore)
	dir := t.TempDir()
	local := openDisk(t, filepath.Join(dir, "store"))
	held := 0
	for i, id := range m.Blocks[:8] {
		if i%3 == 0 {
			d, _ := srcStore.Get(t.Context(), id)
			_ = local.Put(t.Context(), id, d)
			held++
		}
	}
	dest := filepath.Join(dir, "out")
	prog := &counter{}
	st, err := newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, []string{p}, prog, dest)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, data) {
		t.Fatal("FetchFile wrote a different file")
	}
	if !local.HasFile(file) {
		t.Fatal("the store does not hold the file in one piece")
	}
	if st.Present != held || prog.n.Load() != int64(len(data)) {
		t.Errorf("stats %+v, progress %d; want %d present", st, prog.n.Load(), held)
	}
	checkSum(t, st)
	if !bytes.Equal(readBack(t, local, file), data) {
		t.Fatal("store differs")
	}
	vs, err := local.Verify(t.Context())
	if err != nil || len(vs.Corrupt) != 0 {
		t.Fatalf("Verify = %+v, %v", vs, err)
	}

	// Again, elsewhere: nothing fetched, the whole file linked.
	dest2 := filepath.Join(dir, "again")
	st, err = newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, nil, nil, dest2)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest2); !bytes.Equal(got, data) || st.Fetched != 0 || st.Present != st.Blocks {
		t.Fatalf("second FetchFile: stats %+v", st)
	}
	fi1, _ := os.Stat(dest)
	fi2, _ := os.Stat(dest2)
	if !os.SameFile(fi1, fi2) {
		t.Error("second FetchFile copied instead of linking")
	}
	// Over itself: dest stays, no temporary link is left behind.
	if _, err := newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, nil, nil, dest); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestFetchFileResumesPartial: the partial file of an interrupted
// FetchFile is verified and reused; blocks torn in it are fetched again.
func TestFetchFileResumesPartial(t *testing.T) {
	data := randomData(22, 2<<20)
	src := blocks.NewMemStore()
	m, file := putFile(t, data, 128<<10, src)
	p := startPeer(t, src, transfer.ServerOptions{})
	dir := t.TempDir()
	local := openDisk(t, filepath.Join(dir, "store"))
	// What an attempt killed midway leaves: the manifest, and a partial
	// file with some blocks, one of them torn.
	enc := m.Encode()
	if err := local.Put(t.Context(), file, enc); err != nil {
		t.Fatal(err)
	}
	part, err := local.OpenPartial(t.Context(), file, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3, 4, 9} {
		if err := part.WriteAt(data[m.Offset(i):m.Offset(i)+int64(m.BlockLen(i))], m.Offset(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := part.WriteAt(make([]byte, 4096), m.Offset(4)); err != nil { // torn
		t.Fatal(err)
	}
	part.Close()
	dest := filepath.Join(dir, "out")
	st, err := newFetcher(t, local, transfer.FetchOptions{}).FetchFile(t.Context(), file, []string{p.addr}, nil, dest)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, data) {
		t.Fatal("FetchFile wrote a different file")
	}
	if st.Present != 3 || st.Fetched != len(m.Blocks)-3 {
		t.Errorf("stats %+v, want 3 blocks present (0, 3, 9)", st)
	}
	checkSum(t, st)
}

// startPeer2 serves any store (a disk store: the server reads blocks with
// ReadBlock and sends them through blockCodec without copying).
func startPeer2(t *testing.T, store blocks.Store) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(transfer.GRPCServerOptions(testCreds.ServerTLS(), nil)...)
	srv := transfer.NewServer(store, transfer.ServerOptions{Logger: testLogger(t)})
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
	return lis.Addr().String()
}
