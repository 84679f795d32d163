package blocks

import (
	"context"
	"errors"
	"fmt"
)

// DefaultBlockSize is the block size files are cut into unless a caller
// chooses another.
const DefaultBlockSize = 1 << 20

// MaxBlockSize bounds any block a store accepts or a peer may send.
const MaxBlockSize = 16 << 20

// ErrTooLarge: a block is longer than MaxBlockSize. Every Store rejects
// such a block on Put with an error that wraps ErrTooLarge.
var ErrTooLarge = errors.New("block larger than MaxBlockSize")

// Store holds blocks by ID. Every implementation verifies a block's bytes
// against its ID on Put (ErrCorrupt if they differ) and on Get (a block
// that no longer matches is quarantined, never returned, and Get reports
// ErrCorrupt). Put is idempotent. All methods are safe for concurrent use.
type Store interface {
	// Has reports whether the store holds id (without reading its bytes).
	Has(ctx context.Context, id ID) (bool, error)
	// Get returns the verified bytes of id, ErrNotFound or ErrCorrupt.
	Get(ctx context.Context, id ID) ([]byte, error)
	// Put stores data under id after checking Sum(data) == id.
	Put(ctx context.Context, id ID, data []byte) error
	// Delete removes id; deleting a missing block is not an error.
	Delete(ctx context.Context, id ID) error
	// List calls fn for every block held, in no particular order.
	List(ctx context.Context, fn func(id ID, size int64) error) error
}

// CheckBlock reports whether data may be stored under id: it wraps
// ErrTooLarge if data is longer than MaxBlockSize and ErrCorrupt if
// Sum(data) != id. Stores call it on Put; a fetcher calls it on receipt.
func CheckBlock(id ID, data []byte) error {
	if len(data) > MaxBlockSize {
		return fmt.Errorf("block %s: %d bytes: %w", id.Short(), len(data), ErrTooLarge)
	}
	if got := Sum(data); got != id {
		return fmt.Errorf("block %s: content hashes to %s: %w", id.Short(), got.Short(), ErrCorrupt)
	}
	return nil
}

// BlockReader is implemented by stores that can read a block into a
// caller's buffer (MemStore, DiskStore), so that a server reuses its
// buffers instead of allocating one per block. ReadBlock reports
// ErrNotFound and ErrCorrupt as Get does; see DiskStore.ReadBlock for the
// check it makes.
type BlockReader interface {
	ReadBlock(ctx context.Context, id ID, buf []byte) ([]byte, error)
}

// ownStore is implemented by this package's stores (MemStore, DiskStore).
// Their Get verifies every block, and putHashed skips the hash Put would
// compute, for callers such as PutFile that have just computed id from
// data themselves. CPU is the scarce resource on a volunteer peer; this
// halves the hashing of PutFile and WriteFile.
type ownStore interface {
	Store
	putHashed(ctx context.Context, id ID, data []byte) error
}
