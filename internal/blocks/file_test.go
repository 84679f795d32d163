package blocks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	r.Read(b)
	return b
}

func openDisk(t testing.TB, dir string, opts blocks.DiskOptions) *blocks.DiskStore {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := blocks.OpenDisk(dir, opts)
	if err != nil {
		t.Fatalf("OpenDisk: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPutFileRoundTrip(t *testing.T) {
	const bs = 64 << 10
	stores := map[string]func(t *testing.T) blocks.Store{
		"mem":  func(t *testing.T) blocks.Store { return blocks.NewMemStore() },
		"disk": func(t *testing.T) blocks.Store { return openDisk(t, t.TempDir(), blocks.DiskOptions{}) },
	}
	sizes := []int{0, 1, bs - 1, bs, bs + 1, 5<<20 + 12345}
	for name, newStore := range stores {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				s := newStore(t)
				data := randomBytes(uint64(size), size)
				m, file, err := blocks.PutFile(t.Context(), s, bytes.NewReader(data), bs)
				if err != nil {
					t.Fatal(err)
				}
				if file != m.ID() {
					t.Fatalf("file ID %s, manifest ID %s", file.Short(), m.ID().Short())
				}
				if m.Size != int64(size) || m.BlockSize != bs || len(m.Blocks) != blocks.NumBlocks(int64(size), bs) {
					t.Fatalf("manifest %d/%d/%d", m.Size, m.BlockSize, len(m.Blocks))
				}
				for i, id := range m.Blocks {
					lo := m.Offset(i)
					if want := blocks.Sum(data[lo : lo+int64(m.BlockLen(i))]); id != want {
						t.Fatalf("block %d ID %s, want %s", i, id.Short(), want.Short())
					}
				}
				got, err := blocks.ReadManifest(t.Context(), s, file)
				if err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				if err := blocks.WriteFile(t.Context(), s, got, &out); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), data) {
					t.Fatal("WriteFile output differs")
				}
				dest := filepath.Join(t.TempDir(), "out.bin")
				if err := blocks.ExportFile(t.Context(), s, file, dest); err != nil {
					t.Fatal(err)
				}
				exported, err := os.ReadFile(dest)
				if err != nil || !bytes.Equal(exported, data) {
					t.Fatalf("exported file differs (%v)", err)
				}
			})
		}
	}
}

func TestPutFileDefaultBlockSizeAndDedup(t *testing.T) {
	s := blocks.NewMemStore()
	data := make([]byte, 3*blocks.DefaultBlockSize) // three identical zero blocks
	m, _, err := blocks.PutFile(t.Context(), s, bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.BlockSize != blocks.DefaultBlockSize || len(m.Blocks) != 3 {
		t.Fatalf("manifest %d/%d", m.BlockSize, len(m.Blocks))
	}
	if n, _ := s.Usage(); n != 2 { // one data block, one manifest
		t.Fatalf("store holds %d blocks, want 2", n)
	}
	if _, _, err := blocks.PutFile(t.Context(), s, bytes.NewReader(data), blocks.MaxBlockSize+1); err == nil {
		t.Fatal("PutFile accepted a block size above MaxBlockSize")
	}
}

func TestPutPath(t *testing.T) {
	s := blocks.NewMemStore()
	data := randomBytes(7, 300_000)
	src := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, file, err := blocks.PutPath(t.Context(), s, src, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Blocks) != 3 {
		t.Fatalf("%d blocks", len(m.Blocks))
	}
	dest := filepath.Join(t.TempDir(), "tool")
	if err := blocks.ExportFileMode(t.Context(), s, file, dest, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", fi.Mode().Perm())
	}
	if _, _, err := blocks.PutPath(t.Context(), s, filepath.Join(t.TempDir(), "nope"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("PutPath(missing) = %v", err)
	}
}

// countingStore holds only IDs: PutFile's memory use can then be measured
// without the store's copies.
type countingStore struct {
	mu  sync.Mutex
	ids map[blocks.ID]int64
}

func (c *countingStore) Has(_ context.Context, id blocks.ID) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok, nil
}
func (c *countingStore) Get(context.Context, blocks.ID) ([]byte, error) {
	return nil, blocks.ErrNotFound
}
func (c *countingStore) Put(_ context.Context, id blocks.ID, data []byte) error {
	if err := blocks.CheckBlock(id, data); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id] = int64(len(data))
	return nil
}
func (c *countingStore) Delete(context.Context, blocks.ID) error { return nil }
func (c *countingStore) List(context.Context, func(blocks.ID, int64) error) error {
	return nil
}

// TestPutFileStreams puts 256 MiB without ever holding much of it.
func TestPutFileStreams(t *testing.T) {
	const size = 256 << 20
	s := &countingStore{ids: make(map[blocks.ID]int64)}
	r := io.LimitReader(rand.NewChaCha8([32]byte{1}), size)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, _, err := blocks.PutFile(t.Context(), s, r, blocks.DefaultBlockSize)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if m.Size != size {
		t.Fatalf("size %d", m.Size)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
		t.Fatalf("PutFile of %d MiB allocated %d MiB", size>>20, d>>20)
	}
}

func TestMissingAndExportAtomic(t *testing.T) {
	s := openDisk(t, t.TempDir(), blocks.DiskOptions{})
	data := randomBytes(3, 10_000)
	m, file, err := blocks.PutFile(t.Context(), s, bytes.NewReader(data), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 7} {
		if err := s.Delete(t.Context(), m.Blocks[i]); err != nil {
			t.Fatal(err)
		}
	}
	missing, err := blocks.Missing(t.Context(), s, m)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(missing) != "[2 7]" {
		t.Fatalf("Missing = %v, want [2 7]", missing)
	}
	dir := t.TempDir()
	dest := filepath.Join(dir, "out")
	if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = blocks.ExportFile(t.Context(), s, file, dest)
	if !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("ExportFile with missing blocks = %v, want ErrNotFound", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "old" {
		t.Fatalf("failed export changed dest to %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("failed export left %d files in the directory", len(ents))
	}
}

func TestWriteFileRejectsWrongBlocks(t *testing.T) {
	s := blocks.NewMemStore()
	a, b := randomBytes(1, 1000), randomBytes(2, 500)
	for _, d := range [][]byte{a, b} {
		if err := s.Put(t.Context(), blocks.Sum(d), d); err != nil {
			t.Fatal(err)
		}
	}
	// A manifest that claims a 500-byte block is 1000 bytes long.
	m := &blocks.Manifest{Size: 2000, BlockSize: 1000, Blocks: []blocks.ID{blocks.Sum(a), blocks.Sum(b)}}
	if err := blocks.WriteFile(t.Context(), s, m, io.Discard); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("WriteFile = %v, want ErrCorrupt", err)
	}
	// ReadManifest of a block that is not a manifest.
	if _, err := blocks.ReadManifest(t.Context(), s, blocks.Sum(a)); !errors.Is(err, blocks.ErrBadManifest) {
		t.Fatalf("ReadManifest(data block) = %v, want ErrBadManifest", err)
	}
}

func TestPutFileCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := blocks.PutFile(ctx, blocks.NewMemStore(), bytes.NewReader(make([]byte, 10_000)), 1000)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PutFile(cancelled) = %v", err)
	}
}

// lyingStore returns wrong bytes of the right length: a Store that does
// not verify on Get, which WriteFile must not trust.
type lyingStore struct{ blocks.Store }

func (l lyingStore) Get(ctx context.Context, id blocks.ID) ([]byte, error) {
	b, err := l.Store.Get(ctx, id)
	if err == nil && len(b) > 0 {
		b[0] ^= 1
	}
	return b, err
}

func TestWriteFileVerifiesForeignStores(t *testing.T) {
	mem := blocks.NewMemStore()
	m, _, err := blocks.PutFile(t.Context(), mem, bytes.NewReader(randomBytes(1, 5000)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := blocks.WriteFile(t.Context(), lyingStore{mem}, m, io.Discard); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("WriteFile from a lying store = %v, want ErrCorrupt", err)
	}
	// PutFile into a foreign store goes through its Put.
	cs := &countingStore{ids: make(map[blocks.ID]int64)}
	if _, _, err := blocks.PutFile(t.Context(), cs, bytes.NewReader(randomBytes(1, 5000)), 1000); err != nil {
		t.Fatal(err)
	}
	if len(cs.ids) != 6 {
		t.Fatalf("foreign store got %d blocks, want 5 + manifest", len(cs.ids))
	}
}
