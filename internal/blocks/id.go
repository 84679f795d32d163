package blocks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// IDSize is the length of an ID in bytes.
const IDSize = sha256.Size

// ID is the SHA-256 of a block's bytes or of a manifest's canonical
// encoding. It is comparable and usable as a map key.
type ID [IDSize]byte

// Sum returns the ID of data.
func Sum(data []byte) ID { return ID(sha256.Sum256(data)) }

// ParseID parses the 64-digit lower- or upper-case hex form of an ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*IDSize {
		return id, fmt.Errorf("parse id %q: want %d hex digits, got %d", s, 2*IDSize, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse id %q: %w", s, err)
	}
	return id, nil
}

// IDFromBytes converts a 32-byte slice (as carried in protobuf messages).
func IDFromBytes(b []byte) (ID, error) {
	var id ID
	if len(b) != IDSize {
		return id, fmt.Errorf("id: want %d bytes, got %d", IDSize, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// String returns the full hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 8 hex digits, for logs.
func (id ID) Short() string { return hex.EncodeToString(id[:4]) }

// IsZero reports whether id is the zero value.
func (id ID) IsZero() bool { return id == ID{} }

// MarshalText encodes the ID as hex (JSON strings, YAML).
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes the hex form.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Errors shared by every Store implementation.
var (
	// ErrNotFound: the store does not hold the block.
	ErrNotFound = errors.New("block not found")
	// ErrCorrupt: the bytes do not hash to the ID they were stored or sent under.
	ErrCorrupt = errors.New("block corrupt")
)
