package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"
)

// Size is the length of an ID in bytes.
const Size = sha256.Size

// ID is a SHA-256 digest. It is comparable and usable as a map key.
type ID [Size]byte

// Sum returns the ID of data.
func Sum(data []byte) ID { return ID(sha256.Sum256(data)) }

// Parse parses the 64-digit lower- or upper-case hex form of an ID.
func Parse(s string) (ID, error) {
	var id ID
	if len(s) != 2*Size {
		return id, fmt.Errorf("parse id %q: want %d hex digits, got %d", s, 2*Size, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse id %q: %w", s, err)
	}
	return id, nil
}

// FromBytes converts a 32-byte slice (as carried in protobuf messages).
func FromBytes(b []byte) (ID, error) {
	var id ID
	if len(b) != Size {
		return id, fmt.Errorf("id: want %d bytes, got %d", Size, len(b))
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
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// File returns the ID of a file's content, read as a stream.
func File(path string) (ID, error) {
	var id ID
	f, err := os.Open(path)
	if err != nil {
		return id, fmt.Errorf("digest %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return id, fmt.Errorf("digest %s: %w", path, err)
	}
	h.Sum(id[:0])
	return id, nil
}

// StableAfter is how long a file must have been left alone before its
// Identity is remembered with its digest: a file changed again within
// the timestamps' granularity (seconds on some file systems) could keep
// its identity with new content ("racily clean", as git calls it).
const StableAfter = 2 * time.Second
