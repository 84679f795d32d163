package blocks_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

func sampleManifest(size int64, bs int) *blocks.Manifest {
	m := &blocks.Manifest{Size: size, BlockSize: bs, Blocks: make([]blocks.ID, blocks.NumBlocks(size, bs))}
	for i := range m.Blocks {
		m.Blocks[i] = blocks.Sum([]byte{byte(i), byte(i >> 8)})
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []*blocks.Manifest{
		sampleManifest(0, 1),
		sampleManifest(0, blocks.DefaultBlockSize),
		sampleManifest(1, blocks.DefaultBlockSize),
		sampleManifest(blocks.DefaultBlockSize, blocks.DefaultBlockSize),
		sampleManifest(blocks.DefaultBlockSize+1, blocks.DefaultBlockSize),
		sampleManifest(1000, 7),
		sampleManifest(blocks.MaxFileSize, blocks.MaxBlockSize),
	} {
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate(%d/%d): %v", m.Size, m.BlockSize, err)
		}
		b := m.Encode()
		got, err := blocks.DecodeManifest(b)
		if err != nil {
			t.Fatalf("DecodeManifest(Encode(%d/%d)): %v", m.Size, m.BlockSize, err)
		}
		if got.Size != m.Size || got.BlockSize != m.BlockSize || len(got.Blocks) != len(m.Blocks) {
			t.Fatalf("round trip changed %+v", got)
		}
		for i := range m.Blocks {
			if got.Blocks[i] != m.Blocks[i] {
				t.Fatalf("block %d changed", i)
			}
		}
		if !bytes.Equal(got.Encode(), b) || got.ID() != blocks.Sum(b) {
			t.Fatal("re-encoding differs")
		}
	}
}

// TestManifestGolden pins the wire format: changing it changes every file ID.
func TestManifestGolden(t *testing.T) {
	m := &blocks.Manifest{Size: 300, BlockSize: 200, Blocks: []blocks.ID{{1}, {2}}}
	want := append([]byte("P2PM\x01\xac\x02\xc8\x01\x02"), append(append([]byte{1}, make([]byte, 31)...), append([]byte{2}, make([]byte, 31)...)...)...)
	if got := m.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("Encode = %x\nwant     %x", got, want)
	}
}

func TestManifestBlockLen(t *testing.T) {
	m := sampleManifest(2500, 1000)
	for i, want := range []int{1000, 1000, 500} {
		if got := m.BlockLen(i); got != want {
			t.Errorf("BlockLen(%d) = %d, want %d", i, got, want)
		}
	}
	m = sampleManifest(2000, 1000)
	if got := m.BlockLen(1); got != 1000 {
		t.Errorf("BlockLen(last, exact) = %d", got)
	}
}

func header(size, bs, count uint64) []byte {
	b := []byte("P2PM\x01")
	b = binary.AppendUvarint(b, size)
	b = binary.AppendUvarint(b, bs)
	return binary.AppendUvarint(b, count)
}

func TestDecodeManifestRejects(t *testing.T) {
	good := sampleManifest(2500, 1000).Encode()
	tests := map[string][]byte{
		"empty":            nil,
		"magic":            append([]byte("P2PX"), good[4:]...),
		"version":          append([]byte("P2PM\x02"), good[5:]...),
		"trailing byte":    append(bytes.Clone(good), 0),
		"missing byte":     good[:len(good)-1],
		"header only":      good[:5],
		"zero block size":  header(0, 0, 0),
		"huge block size":  header(0, blocks.MaxBlockSize+1, 0),
		"negative size":    header(1<<63, 1, 0),
		"huge size":        header(blocks.MaxFileSize+1, blocks.MaxBlockSize, 4097),
		"count too small":  append(header(2500, 1000, 2), make([]byte, 64)...),
		"count too large":  append(header(2500, 1000, 4), make([]byte, 128)...),
		"empty with block": append(header(0, 1000, 1), make([]byte, 32)...),
		"non-minimal size": []byte("P2PM\x01\x80\x00\x01\x00"),
		"overflow varint":  append([]byte("P2PM\x01"), bytes.Repeat([]byte{0xff}, 11)...),
		"absurd count":     header(blocks.MaxFileSize, 1, blocks.MaxFileSize),
		"too long":         append(header(blocks.MaxFileSize, 128<<10, 1<<19), make([]byte, 32<<19)...),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := blocks.DecodeManifest(b)
			if !errors.Is(err, blocks.ErrBadManifest) {
				t.Fatalf("DecodeManifest = %+v, %v; want ErrBadManifest", m, err)
			}
		})
	}
}

// TestDecodeManifestAllocation: a small input claiming a huge file must be
// rejected without allocating for its claimed blocks.
func TestDecodeManifestAllocation(t *testing.T) {
	b := append(header(blocks.MaxFileSize, 1<<20, 1<<16), make([]byte, 32)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := blocks.DecodeManifest(b); err == nil {
			t.Fatal("accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 100*1024 {
		t.Fatalf("100 rejected decodes allocated %d bytes", d)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(sampleManifest(0, 1).Encode())
	f.Add(sampleManifest(2500, 1000).Encode())
	f.Add(sampleManifest(1, blocks.MaxBlockSize).Encode())
	f.Add(header(blocks.MaxFileSize, 1, blocks.MaxFileSize))
	f.Add([]byte("P2PM\x01\x80\x00\x01\x00"))
	f.Add([]byte("P2PM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The only allocation that grows with the input is the block list,
		// which the input holds byte for byte. The least of three runs
		// filters out allocations by the runtime and the fuzzing engine.
		least := uint64(1 << 63)
		var (
			m   *blocks.Manifest
			err error
		)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err = blocks.DecodeManifest(b)
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		if least > uint64(len(b))+4096 {
			t.Fatalf("decoding %d bytes allocated %d", len(b), least)
		}
		if err != nil {
			if !errors.Is(err, blocks.ErrBadManifest) {
				t.Fatalf("error does not wrap ErrBadManifest: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted manifest fails Validate: %v", err)
		}
		if got := m.Encode(); !bytes.Equal(got, b) {
			t.Fatalf("Encode(Decode(b)) != b:\n%x\n%x", got, b)
		}
		if m.Size > 0 {
			last := len(m.Blocks) - 1
			if n := m.BlockLen(last); n <= 0 || n > m.BlockSize {
				t.Fatalf("last block length %d", n)
			}
		}
	})
}
