package blocks

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxFileSize bounds the size of a file a manifest may describe.
const MaxFileSize = 64 << 30

// MaxManifestSize bounds a manifest's encoding. A manifest is stored as a
// block, so it can be no larger than one.
const MaxManifestSize = MaxBlockSize

// manifestMagic starts every encoded manifest; manifestVersion follows it.
const (
	manifestMagic   = "P2PM"
	manifestVersion = 1
)

// ErrBadManifest is wrapped by every DecodeManifest error.
var ErrBadManifest = errors.New("bad manifest")

// Manifest describes a file as an ordered list of fixed-size blocks: block
// i holds bytes [i*BlockSize, min((i+1)*BlockSize, Size)) of the file. The
// file's ID is the ID of the manifest's canonical encoding, stored as a
// block of its own.
type Manifest struct {
	Size      int64 // file length in bytes, 0..MaxFileSize
	BlockSize int   // length of every block but the last, 1..MaxBlockSize
	Blocks    []ID  // ceil(Size/BlockSize) block IDs
}

// Encode returns the canonical encoding (see docs/design/blocks.md):
//
//	"P2PM" 0x01 uvarint(Size) uvarint(BlockSize) uvarint(len(Blocks)) Blocks...
//
// Two equal manifests encode to the same bytes and therefore the same ID.
func (m *Manifest) Encode() []byte {
	b := make([]byte, 0, len(manifestMagic)+1+3*binary.MaxVarintLen64+len(m.Blocks)*IDSize)
	b = append(b, manifestMagic...)
	b = append(b, manifestVersion)
	b = binary.AppendUvarint(b, uint64(m.Size))
	b = binary.AppendUvarint(b, uint64(m.BlockSize))
	b = binary.AppendUvarint(b, uint64(len(m.Blocks)))
	for i := range m.Blocks {
		b = append(b, m.Blocks[i][:]...)
	}
	return b
}

// ID returns the ID of the manifest's encoding: the file's ID.
func (m *Manifest) ID() ID { return Sum(m.Encode()) }

// NumBlocks returns how many blocks a file of size bytes is cut into.
func NumBlocks(size int64, blockSize int) int {
	if size <= 0 || blockSize <= 0 {
		return 0
	}
	return int((size + int64(blockSize) - 1) / int64(blockSize))
}

// BlockLen returns the length of block i: BlockSize for all blocks but the
// last, which holds the remainder. It panics if i is out of range.
func (m *Manifest) BlockLen(i int) int {
	if i < 0 || i >= len(m.Blocks) {
		panic(fmt.Sprintf("blocks: BlockLen(%d) of a %d-block manifest", i, len(m.Blocks)))
	}
	if i < len(m.Blocks)-1 {
		return m.BlockSize
	}
	return int(m.Size - int64(i)*int64(m.BlockSize))
}

// Offset returns the file offset at which block i starts.
func (m *Manifest) Offset(i int) int64 { return int64(i) * int64(m.BlockSize) }

// Validate checks the invariants DecodeManifest enforces, for manifests
// built in memory.
func (m *Manifest) Validate() error {
	if m.BlockSize <= 0 || m.BlockSize > MaxBlockSize {
		return fmt.Errorf("%w: block size %d outside 1..%d", ErrBadManifest, m.BlockSize, MaxBlockSize)
	}
	if m.Size < 0 || m.Size > MaxFileSize {
		return fmt.Errorf("%w: size %d outside 0..%d", ErrBadManifest, m.Size, int64(MaxFileSize))
	}
	if want := NumBlocks(m.Size, m.BlockSize); len(m.Blocks) != want {
		return fmt.Errorf("%w: %d blocks for size %d and block size %d, want %d",
			ErrBadManifest, len(m.Blocks), m.Size, m.BlockSize, want)
	}
	if n := manifestLen(len(m.Blocks), m.Size, m.BlockSize); n > MaxManifestSize {
		return fmt.Errorf("%w: encoding is %d bytes, limit %d", ErrBadManifest, n, MaxManifestSize)
	}
	return nil
}

func manifestLen(nblocks int, size int64, blockSize int) int {
	return len(manifestMagic) + 1 + uvarintLen(uint64(size)) + uvarintLen(uint64(blockSize)) +
		uvarintLen(uint64(nblocks)) + nblocks*IDSize
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// DecodeManifest parses a canonical manifest encoding. It is strict: wrong
// magic or version, non-minimal varints, a block size outside
// 1..MaxBlockSize, a size outside 0..MaxFileSize, a block count other than
// ceil(Size/BlockSize), an encoding longer than MaxManifestSize and
// trailing bytes are all errors wrapping ErrBadManifest. It allocates only
// after the input's length has been checked to hold every block ID, so
// Encode(DecodeManifest(b)) == b for every accepted b.
func DecodeManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadManifest, len(b), MaxManifestSize)
	}
	if len(b) < len(manifestMagic)+1 || string(b[:len(manifestMagic)]) != manifestMagic {
		return nil, fmt.Errorf("%w: no %q magic", ErrBadManifest, manifestMagic)
	}
	if v := b[len(manifestMagic)]; v != manifestVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadManifest, v, manifestVersion)
	}
	rest := b[len(manifestMagic)+1:]
	var fields [3]uint64
	for i, name := range [3]string{"size", "block size", "block count"} {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return nil, fmt.Errorf("%w: truncated or overflowing %s", ErrBadManifest, name)
		}
		if n != uvarintLen(v) {
			return nil, fmt.Errorf("%w: non-canonical varint for %s", ErrBadManifest, name)
		}
		fields[i] = v
		rest = rest[n:]
	}
	size, blockSize, count := fields[0], fields[1], fields[2]
	if blockSize == 0 || blockSize > MaxBlockSize {
		return nil, fmt.Errorf("%w: block size %d outside 1..%d", ErrBadManifest, blockSize, MaxBlockSize)
	}
	if size > MaxFileSize {
		return nil, fmt.Errorf("%w: size %d outside 0..%d", ErrBadManifest, size, uint64(MaxFileSize))
	}
	want := (size + blockSize - 1) / blockSize
	if count != want {
		return nil, fmt.Errorf("%w: %d blocks for size %d and block size %d, want %d",
			ErrBadManifest, count, size, blockSize, want)
	}
	// count <= MaxFileSize, so count*IDSize cannot overflow.
	if uint64(len(rest)) != count*IDSize {
		return nil, fmt.Errorf("%w: %d bytes of block IDs, want %d", ErrBadManifest, len(rest), count*IDSize)
	}
	m := &Manifest{Size: int64(size), BlockSize: int(blockSize), Blocks: make([]ID, count)}
	for i := range m.Blocks {
		copy(m.Blocks[i][:], rest[i*IDSize:])
	}
	return m, nil
}
