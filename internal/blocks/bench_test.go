package blocks_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

var blockSizes = []int{256 << 10, 1 << 20, 4 << 20}

const benchFileSize = 64 << 20

// BenchmarkPutFile stores a 64 MiB random file in a fresh disk store:
// read, hash, write, fsync and rename every block, then the manifest. The
// numbers justify DefaultBlockSize (see docs/design/blocks.md).
func BenchmarkPutFile(b *testing.B) {
	data := randomBytes(42, benchFileSize)
	for _, bs := range blockSizes {
		b.Run(fmt.Sprintf("disk/%dKiB", bs>>10), func(b *testing.B) {
			b.SetBytes(benchFileSize)
			parent := b.TempDir()
			i := 0
			for b.Loop() {
				b.StopTimer()
				dir := filepath.Join(parent, fmt.Sprint(i))
				i++
				s, err := blocks.OpenDisk(dir, blocks.DiskOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, _, err := blocks.PutFile(b.Context(), s, bytes.NewReader(data), bs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(blocks.NumBlocks(benchFileSize, bs)), "blocks/file")
		})
		b.Run(fmt.Sprintf("mem/%dKiB", bs>>10), func(b *testing.B) {
			b.SetBytes(benchFileSize)
			for b.Loop() {
				s := blocks.NewMemStore()
				if _, _, err := blocks.PutFile(b.Context(), s, bytes.NewReader(data), bs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteFile reads a 64 MiB file back out of a disk store,
// verifying every block.
func BenchmarkWriteFile(b *testing.B) {
	data := randomBytes(42, benchFileSize)
	for _, bs := range blockSizes {
		b.Run(fmt.Sprintf("disk/%dKiB", bs>>10), func(b *testing.B) {
			s, err := blocks.OpenDisk(b.TempDir(), blocks.DiskOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m, _, err := blocks.PutFile(b.Context(), s, bytes.NewReader(data), bs)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchFileSize)
			for b.Loop() {
				if err := blocks.WriteFile(b.Context(), s, m, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDiskPutOverhead measures the fixed cost of one Put on disk
// (temp file, fsync, rename, directory fsync) with a 64-byte block: the
// cost that larger blocks amortize.
func BenchmarkDiskPutOverhead(b *testing.B) {
	s, err := blocks.OpenDisk(b.TempDir(), blocks.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 64)
	var n uint64
	for b.Loop() {
		n++
		for i := range 8 {
			data[i] = byte(n >> (8 * i))
		}
		if err := s.Put(b.Context(), blocks.Sum(data), data); err != nil {
			b.Fatal(err)
		}
	}
}
