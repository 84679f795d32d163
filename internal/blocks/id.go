package blocks

import (
	"errors"
	"fmt"

	"github.com/p2pc/p2pc/internal/digest"
)

// IDSize is the length of an ID in bytes.
const IDSize = digest.Size

// ID is the SHA-256 of a block's bytes or of a manifest's canonical
// encoding: p2pc's one digest type (package digest). It is comparable and
// usable as a map key.
type ID = digest.ID

// Sum returns the ID of data.
func Sum(data []byte) ID { return digest.Sum(data) }

// ParseID parses the 64-digit lower- or upper-case hex form of an ID.
func ParseID(s string) (ID, error) { return digest.Parse(s) }

// IDFromBytes converts a 32-byte slice (as carried in protobuf messages).
func IDFromBytes(b []byte) (ID, error) { return digest.FromBytes(b) }

// Errors shared by every Store implementation.
var (
	// ErrNotFound: the store does not hold the block.
	ErrNotFound = errors.New("block not found")
	// ErrCorrupt: the bytes do not hash to the ID they were stored or sent under.
	ErrCorrupt = errors.New("block corrupt")
	// ErrFull: a store with a hard cap holds as much as it may, and
	// what it holds is pinned or in use (see FullError).
	ErrFull = errors.New("block store full")
)

// FullError says what a store at its hard cap could not take.
type FullError struct {
	Need, Held, Cap int64 // bytes
}

func (e *FullError) Error() string {
	return fmt.Sprintf("block store full: %d bytes more needed, %d held (pinned by jobs or in use), cap %d", e.Need, e.Held, e.Cap)
}

// Is makes errors.Is(err, ErrFull) true.
func (e *FullError) Is(target error) bool { return target == ErrFull }
