package blocks_test

import (
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/blocks/blockstest"
)

func TestMemStoreConformance(t *testing.T) {
	blockstest.TestStore(t, func(t *testing.T) blocks.Store { return blocks.NewMemStore() })
}

func TestDiskStoreConformance(t *testing.T) {
	blockstest.TestStore(t, func(t *testing.T) blocks.Store {
		s, err := blocks.OpenDisk(t.TempDir(), blocks.DiskOptions{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestCappedDiskStoreConformance(t *testing.T) {
	// A cap far above what the suite stores: GC must never fire, and the
	// bookkeeping around it must not change Store semantics.
	blockstest.TestStore(t, func(t *testing.T) blocks.Store {
		s, err := blocks.OpenDisk(t.TempDir(), blocks.DiskOptions{MaxBytes: 1 << 30, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestEphemeralDiskStoreConformance(t *testing.T) {
	blockstest.TestStore(t, func(t *testing.T) blocks.Store {
		s, err := blocks.OpenDisk(t.TempDir(), blocks.DiskOptions{Ephemeral: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
